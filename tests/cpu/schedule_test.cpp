// The block schedule's bookkeeping: the host model against hand-worked cases,
// and its safety invariants on arbitrary (malformed) offsets.
#include <gtest/gtest.h>

#include <random>

#include "common/test_seed.h"
#include "reference/reference.h"
#include "schedule/block_schedule.h"

namespace blockattn {
namespace schedule {
// Found by argument-dependent lookup from std::vector's operator==.
bool operator==(const BlockDesc& a, const BlockDesc& b) {
  return a.row_begin == b.row_begin && a.row_count == b.row_count;
}
}  // namespace schedule

namespace {

using schedule::BlockDesc;

TEST(Schedule, CutsEachSequenceFromItsOwnStart) {
  // lengths 0, 1, 64, 65, 0, 130
  const std::vector<int32_t> offsets = {0, 0, 1, 65, 130, 130, 260};
  const std::vector<BlockDesc> want = {{0, 1}, {1, 64}, {65, 64}, {129, 1}, {130, 64}, {194, 64}, {258, 2}};
  EXPECT_EQ(reference::block_schedule(offsets, 260), want);
}

TEST(Schedule, NoSequencesNoBlocks) {
  EXPECT_TRUE(reference::block_schedule({0}, 0).empty());
  EXPECT_TRUE(reference::block_schedule({0, 0, 0}, 100).empty());
}

TEST(Schedule, MalformedOffsetsAreClampedAndMadeMonotonic) {
  // negative start, a decrease, past-the-end values
  const std::vector<int32_t> offsets = {-5, 70, 10, 100, 1000, 40};
  // running max clamped to [0, 120]: 0, 70, 70, 100, 120, 120
  const std::vector<BlockDesc> want = {{0, 64}, {64, 6}, {70, 30}, {100, 20}};
  EXPECT_EQ(reference::block_schedule(offsets, 120), want);
}

TEST(Schedule, MaxBlocksBoundsEveryOffsetsContent) {
  std::mt19937_64 rng = testing::test_rng();
  for (int trial = 0; trial < 2000; ++trial) {
    const int32_t T = std::uniform_int_distribution<int32_t>(0, 3000)(rng);
    const int B = std::uniform_int_distribution<int>(0, 40)(rng);
    std::uniform_int_distribution<int32_t> any(-100, T + 100);
    std::vector<int32_t> offsets(B + 1);
    for (auto& o : offsets)
      o = any(rng);
    if (trial % 2) std::sort(offsets.begin(), offsets.end());  // half valid-looking
    const int32_t block_size = 32 << (trial % 3);              // 32, 64, 128: the schedule takes any
    const auto blocks = reference::block_schedule(offsets, T, block_size);
    ASSERT_LE(static_cast<int64_t>(blocks.size()), schedule::max_blocks(B, T, block_size));
    int32_t prev_end = 0;
    for (const auto& b : blocks) {
      ASSERT_GE(b.row_begin, prev_end);  // ordered and disjoint
      ASSERT_GE(b.row_count, 1);
      ASSERT_LE(b.row_count, block_size);
      ASSERT_LE(b.row_begin + b.row_count, T);  // in bounds
      prev_end = b.row_begin + b.row_count;
    }
  }
}

TEST(Schedule, WorkspaceHoldsTheLargestTable) {
  EXPECT_EQ(schedule::WorkspaceLayout::bytes(0), schedule::WorkspaceLayout::kHeaderBytes);
  // 3 sequences of 1 token: 3 blocks; bound (3 + 63*3)/64 = 3.
  EXPECT_EQ(schedule::max_blocks(3, 3, kDefaultBlockSize), 3);
  EXPECT_EQ(workspace_size(3, 3),
            schedule::WorkspaceLayout::kHeaderBytes + 3 * (sizeof(BlockDesc) + sizeof(schedule::BlockSeq)));
}

}  // namespace
}  // namespace blockattn
