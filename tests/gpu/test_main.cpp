// main() of test_gpu: GoogleTest's flags, plus `--cases N`, the number of
// differential fuzzing cases (soak mode; the default is a few hundred, and
// BLOCKATTN_FUZZ_CASES sets it too).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cases") == 0 && i + 1 < argc) {
      setenv("BLOCKATTN_FUZZ_CASES", argv[i + 1], 1);
      ++i;
    } else {
      std::fprintf(stderr, "test_gpu: unknown argument %s (GoogleTest flags, or --cases N)\n", argv[i]);
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
