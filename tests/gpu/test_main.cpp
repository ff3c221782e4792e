// main() of test_gpu: GoogleTest's flags, plus `--cases N`, the number of
// differential fuzzing cases (soak mode; the default is a few hundred, and
// BLOCKATTN_FUZZ_CASES sets it too).
#include <blockattn/blockattn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/kernel_table.h"

namespace {

// test_gpu links the library statically (blockattn_static), so the kernels
// under test are the ones built with it: a libblockattn.so put first on
// LD_LIBRARY_PATH changes nothing here. Sessions 59 and 60 ran a new
// library's tests that way and tested the old kernels (docs/perf.md,
// "Session 60"); this line says what is tested.
void print_what_is_tested() {
  std::printf(
      "test_gpu: blockattn %s linked in statically (LD_LIBRARY_PATH does not change the kernels tested); head dims "
      "%s; block sizes %s\n",
      blockattn::version(), blockattn::core::built_head_dims().c_str(), blockattn::core::built_block_sizes().c_str());
}

}  // namespace

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
  // Not with --gtest_list_tests, whose output ctest's discovery parses.
  if (!GTEST_FLAG_GET(list_tests)) print_what_is_tested();
  return RUN_ALL_TESTS();
}
