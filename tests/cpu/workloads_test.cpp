// The shared workload generator (docs/workloads.md): its first values are
// pinned, so a change to it cannot pass unnoticed, and the cross-language
// ctest (workloads_match_python) checks python/blockattn/workload_defs.py against
// the print_workload_lengths tool built from the same C++.
#include <gtest/gtest.h>

#include <cmath>

#include "support/workloads.h"

namespace blockattn::testing {
namespace {

TEST(Workloads, SplitMix64ReferenceValues) {
  // SplitMix64 from seed 0; the published reference sequence starts with these.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(rng.next(), 0x06C45D188009454Full);
}

TEST(Workloads, LengthsStayInBoundsWithTheRightMean) {
  for (const Workload& w : every_workload()) {
    const LengthBounds b = length_bounds(w.max_len, w.fill);
    const auto lengths = sequence_lengths(w.num_seqs, w.max_len, w.fill, 0);
    ASSERT_EQ(static_cast<int>(lengths.size()), w.num_seqs);
    double sum = 0;
    for (int32_t len : lengths) {
      ASSERT_GE(len, b.low) << w.name;
      ASSERT_LE(len, b.high) << w.name;
      sum += len;
    }
    // Uniform on [low, high]: mean within a few standard errors of the middle.
    const double mid = 0.5 * (b.low + b.high), sd = (b.high - b.low + 1) / std::sqrt(12.0);
    EXPECT_NEAR(sum / w.num_seqs, mid, 5 * sd / std::sqrt(double(w.num_seqs))) << w.name;
  }
}

TEST(Workloads, NamesAreUniqueAndFindable) {
  const auto all = all_workloads();
  EXPECT_EQ(all.size(), 24u);
  for (const Workload& w : all)
    EXPECT_EQ(find_workload(all, w.name), &w) << w.name;
  EXPECT_NE(find_workload(all, "headline-d128"), nullptr);
  EXPECT_EQ(find_workload(all, "no-such-workload"), nullptr);
  const auto every = every_workload();
  EXPECT_EQ(every.size(), 34u);
  for (const char* name :
       {"gqa-d128-h8x2", "mqa-d64-h8x1", "tail-d128", "tail-d64", "headdim-d32-h16", "headdim-d96-h5",
        "headdim-d160-h3", "headdim-d192-h3", "headdim-d224-h2", "headdim-d256-h2"})
    EXPECT_NE(find_workload(every, name), nullptr) << name;
}

}  // namespace
}  // namespace blockattn::testing
