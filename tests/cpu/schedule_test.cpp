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
  return a.row_begin == b.row_begin && a.row_count == b.row_count && a.segment_starts == b.segment_starts;
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

TEST(Schedule, PacksRunsOfShortSequencesGreedily) {
  // lengths 10, 20, 30, 0, 5, 64, 3, 70, 40, 24, 1
  const std::vector<int32_t> offsets = {0, 10, 30, 60, 60, 65, 129, 132, 202, 242, 266, 267};
  // Greedy in 64 rows: {10, 20, 30} = 60 rows (starts at 0, 10, 30); the empty
  // sequence ends the run; {5} alone (the next, 64, is a whole block); 64;
  // {3}; 70 = 64 + 6; {40, 24} = 64 rows (starts 0, 40); {1}.
  // A packed tile sits in its first sequence's entry; the entries of the
  // sequences it took are empty (the tiles table keeps the blocks' indexing).
  const std::vector<BlockDesc> tiles = {{0, 60, (1ull << 0) | (1ull << 10) | (1ull << 30)},
                                        {10, 0},
                                        {30, 0},
                                        {60, 5},
                                        {65, 64},
                                        {129, 3},
                                        {132, 64},
                                        {196, 6},
                                        {202, 64, (1ull << 0) | (1ull << 40)},
                                        {242, 0},
                                        {266, 1}};
  std::vector<schedule::BlockSeq> seqs;
  EXPECT_EQ(reference::tile_schedule(offsets, 267, 64, &seqs), tiles);
  ASSERT_EQ(seqs.size(), tiles.size());
  EXPECT_EQ(seqs[0].seq, 0);
  EXPECT_EQ(seqs[2].seq, 2);
  EXPECT_EQ(seqs[8].seq, 8);
  EXPECT_EQ(seqs[7].first_pos, 64);
  EXPECT_EQ(tiles.size(), reference::block_schedule(offsets, 267, 64).size());
  // A tile stays within its aligned group of 32 sequences: 33 one-token
  // sequences make a 32-row tile and a 1-row one.
  std::vector<int32_t> ones(34);
  for (int32_t i = 0; i < 34; ++i)
    ones[i] = i;
  const auto packed = reference::tile_schedule(ones, 33, 64);
  ASSERT_EQ(packed.size(), 33u);
  EXPECT_EQ(packed[0].row_count, 32);
  EXPECT_EQ(packed[0].segment_starts, ~uint64_t{0} >> 32);
  EXPECT_EQ(packed[31].row_count, 0);
  EXPECT_EQ(packed[32].row_begin, 32);
  EXPECT_EQ(packed[32].row_count, 1);
  // 128-token blocks are never packed (one bit per row of a tile).
  EXPECT_EQ(reference::tile_schedule(offsets, 267, 128), reference::block_schedule(offsets, 267, 128));
}

TEST(Schedule, SplitScheduleGivesShortBlocksTablesOfTheirOwn) {
  // 128-token blocks; lengths 0, 1, 64, 65, 130, 200, 40, 24, 129.
  const std::vector<int32_t> offsets = {0, 0, 1, 65, 130, 260, 460, 500, 524, 653};
  const std::vector<BlockDesc> long_blocks = {{65, 65}, {130, 128}, {260, 128}, {388, 72}, {524, 128}};
  std::vector<schedule::BlockSeq> seqs;
  EXPECT_EQ(reference::split_block_schedule(offsets, 653, 128, &seqs), long_blocks);
  ASSERT_EQ(seqs.size(), long_blocks.size());
  EXPECT_EQ(seqs[3].seq, 5);
  EXPECT_EQ(seqs[3].first_pos, 128);
  // The blocks of at most 64 rows, in sequence order: sequences 1, 2, 4, 6,
  // 7 and 8 have one; 0 (empty), 3 and 5 (last blocks of 65 and 72 rows)
  // have none.
  const std::vector<BlockDesc> short_blocks = {{0, 1}, {1, 64}, {258, 2}, {460, 40}, {500, 24}, {652, 1}};
  EXPECT_EQ(reference::short_block_schedule(offsets, 653, 128, false, &seqs), short_blocks);
  ASSERT_EQ(seqs.size(), short_blocks.size());
  const std::vector<int32_t> short_seqs = {1, 2, 4, 6, 7, 8}, first_pos = {0, 0, 128, 0, 0, 128};
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(seqs[i].seq, short_seqs[i]) << "entry " << i;
    EXPECT_EQ(seqs[i].first_pos, first_pos[i]) << "entry " << i;
  }
  // Packed: {40, 24} share a 64-row tile; 1 is alone (the 64 after it is a
  // whole block), as is every tail of a longer sequence.
  std::vector<BlockDesc> short_tiles = short_blocks;
  short_tiles[3] = {460, 64, (1ull << 0) | (1ull << 40)};
  short_tiles[4] = {500, 0};
  EXPECT_EQ(reference::short_block_schedule(offsets, 653, 128, true), short_tiles);
}

// Offsets for up to 40 sequences in up to 3000 tokens (*total), any values
// around [0, T] (malformed), sorted (valid-looking) where `sorted`.
std::vector<int32_t> random_offsets(std::mt19937_64& rng, bool sorted, int32_t* total) {
  const int32_t T = *total = std::uniform_int_distribution<int32_t>(0, 3000)(rng);
  const int B = std::uniform_int_distribution<int>(0, 40)(rng);
  std::uniform_int_distribution<int32_t> any(-100, T + 100);
  std::vector<int32_t> offsets(B + 1);
  for (auto& o : offsets)
    o = any(rng);
  if (sorted) std::sort(offsets.begin(), offsets.end());
  return offsets;
}

// Every block of a split schedule is in one of its tables, once.
TEST(Schedule, SplitScheduleCoversEveryBlockOnce) {
  std::mt19937_64 rng = testing::test_rng();
  for (int trial = 0; trial < 1000; ++trial) {
    int32_t T = 0;
    const std::vector<int32_t> offsets = random_offsets(rng, trial % 2, &T);
    const int B = static_cast<int>(offsets.size()) - 1;
    std::vector<BlockDesc> joined = reference::split_block_schedule(offsets, T, 128);
    const auto shorts = reference::short_block_schedule(offsets, T, 128, false);
    ASSERT_LE(shorts.size(), static_cast<size_t>(B));  // a sequence's at most
    for (const BlockDesc& b : shorts) {
      ASSERT_GE(b.row_count, 1);  // only sequences that have one
      ASSERT_LE(b.row_count, schedule::kShortBlockRows);
      joined.push_back(b);
    }
    std::sort(joined.begin(), joined.end(),
              [](const BlockDesc& a, const BlockDesc& b) { return a.row_begin < b.row_begin; });
    ASSERT_EQ(joined, reference::block_schedule(offsets, T, 128));
    // The packed short tiles cover the same rows, each sequence's in one tile.
    int32_t rows = 0, packed_rows = 0;
    for (const BlockDesc& b : shorts)
      rows += b.row_count;
    const auto packed = reference::short_block_schedule(offsets, T, 128, true);
    ASSERT_EQ(packed.size(), shorts.size());  // the same indexing
    for (const BlockDesc& b : packed) {
      ASSERT_LE(b.row_count, schedule::kShortBlockRows);
      packed_rows += b.row_count;
    }
    ASSERT_EQ(packed_rows, rows);
  }
}

TEST(Schedule, MaxBlocksBoundsEveryOffsetsContent) {
  std::mt19937_64 rng = testing::test_rng();
  for (int trial = 0; trial < 2000; ++trial) {
    int32_t T = 0;
    const std::vector<int32_t> offsets = random_offsets(rng, trial % 2, &T);  // half valid-looking
    const int B = static_cast<int>(offsets.size()) - 1;
    const int32_t block_size = 32 << (trial % 3);  // 32, 64, 128: the schedule takes any
    // The attention blocks and the device's tiles (short sequences packed).
    const auto blocks_table = reference::block_schedule(offsets, T, block_size);
    const auto tiles_table = reference::tile_schedule(offsets, T, block_size);
    ASSERT_EQ(tiles_table.size(), blocks_table.size());  // the same indexing
    for (const auto* table : {&blocks_table, &tiles_table}) {
      const auto& blocks = *table;
      ASSERT_LE(static_cast<int64_t>(blocks.size()), schedule::max_blocks(B, T, block_size));
      int32_t prev_end = 0;
      for (const auto& b : blocks) {
        if (b.row_count == 0 && table == &tiles_table) continue;  // a sequence packed into an earlier tile
        ASSERT_GE(b.row_count, 1);
        ASSERT_GE(b.row_begin, prev_end);  // ordered and disjoint
        ASSERT_LE(b.row_count, block_size);
        ASSERT_LE(b.row_begin + b.row_count, T);  // in bounds
        ASSERT_EQ(b.segment_starts & 1, 1u);      // row 0 starts a segment, and no segment starts past the rows
        if (b.row_count < 64) ASSERT_EQ(b.segment_starts >> b.row_count, 0u);
        prev_end = b.row_begin + b.row_count;
      }
    }
  }
}

// The first pass's ranges (one CTA each) cover the batch, none of them
// empty, in whole packing groups and whole chunks, at most
// kMaxSequenceRanges of them, for any batch size.
TEST(Schedule, SequenceRangesCoverTheBatch) {
  std::mt19937_64 rng = testing::test_rng();
  std::vector<int32_t> sizes = {0,      1,      31,     32,     1023,   1024,    1025,    20000,
                                131071, 131072, 131073, 131074, 300001, 1 << 20, 1 << 24, 2147483647};
  std::uniform_int_distribution<int32_t> any(0, 1 << 26);
  for (int i = 0; i < 200; ++i)
    sizes.push_back(any(rng));
  for (int32_t n : sizes) {
    SCOPED_TRACE("num_seqs=" + std::to_string(n));
    const schedule::SequenceRanges r = schedule::sequence_ranges(n);
    ASSERT_GE(r.count, 1);
    ASSERT_LE(r.count, schedule::kMaxSequenceRanges);
    ASSERT_EQ(r.length % schedule::kPackGroup, 0);
    ASSERT_EQ(r.length % (r.wide ? schedule::kWideChunkSeqs : schedule::kNarrowChunkSeqs), 0);
    ASSERT_EQ(r.wide, int64_t{n} > int64_t{schedule::kMaxSequenceRanges} * schedule::kNarrowChunkSeqs);
    ASSERT_GE(int64_t{r.count} * r.length, n);                          // every sequence in a range
    if (n > 0) ASSERT_LT(int64_t{r.count - 1} * r.length, int64_t{n});  // the last range not empty
  }
}

TEST(Schedule, WorkspaceHoldsTheLargestTable) {
  EXPECT_EQ(schedule::WorkspaceLayout::bytes(0, 0),
            schedule::WorkspaceLayout::kHeaderBytes + (2 + 2 * schedule::kMaxSequenceRanges) * sizeof(int32_t));
  // 3 sequences of 1 token: 3 blocks; bound (3 + 63*3)/64 = 3.
  EXPECT_EQ(schedule::max_blocks(3, 3, kDefaultBlockSize), 3);
  // Two tables (blocks, and tiles with short sequences packed), each with its
  // BlockSeq table, the two short tables of a split schedule (room for a
  // sequence's entry each), then two per-sequence arrays, the ranges' block
  // counts, a per-group array (one group) and the ranges' short counts.
  EXPECT_EQ(workspace_size(3, 3), schedule::WorkspaceLayout::kHeaderBytes +
                                      2 * 3 * (sizeof(BlockDesc) + sizeof(schedule::BlockSeq)) +
                                      2 * 3 * (sizeof(BlockDesc) + sizeof(schedule::BlockSeq)) +
                                      (2 * 3 + 2 + 1 + 2 * schedule::kMaxSequenceRanges) * sizeof(int32_t));
}

}  // namespace
}  // namespace blockattn
