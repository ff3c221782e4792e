// The device schedule kernel against its host model, across the first
// pass's range and chunk boundaries (ranges of 1024 sequences up to 128 of
// them, of whole 8192-sequence chunks past that) and on malformed offsets,
// whose running max carries across ranges; and the split schedule of
// 128-token blocks, whose short tables take the blocks of at most 64 rows.
#include <gtest/gtest.h>

#include <random>

#include "common/test_seed.h"
#include "reference/reference.h"
#include "schedule/block_schedule.h"
#include "support/device_buffer.h"

namespace blockattn {
namespace {

using namespace blockattn::testing;
using schedule::BlockDesc;
using schedule::WorkspaceLayout;

// One table of the device schedule against the host model's.
void expect_table(const std::vector<unsigned char>& raw, int32_t count, const BlockDesc* table,
                  const schedule::BlockSeq* seqs, const std::vector<BlockDesc>& want,
                  const std::vector<schedule::BlockSeq>& want_seqs) {
  ASSERT_EQ(count, static_cast<int32_t>(want.size()));
  ASSERT_LE(reinterpret_cast<const unsigned char*>(seqs + count), raw.data() + raw.size());
  for (int32_t i = 0; i < count; ++i) {
    ASSERT_EQ(table[i].row_begin, want[i].row_begin) << "entry " << i;
    ASSERT_EQ(table[i].row_count, want[i].row_count) << "entry " << i;
    ASSERT_EQ(table[i].segment_starts, want[i].segment_starts) << "entry " << i;
    ASSERT_EQ(seqs[i].seq, want_seqs[i].seq) << "entry " << i;
    ASSERT_EQ(seqs[i].first_pos, want_seqs[i].first_pos) << "entry " << i;
  }
}

// The device schedule against the host model: with `split` (block sizes
// over kShortBlockRows), its blocks and tiles tables hold the blocks of more
// than kShortBlockRows rows and its short tables the others.
void expect_device_matches_host(const std::vector<int32_t>& offsets, int32_t total_tokens, int32_t block_size,
                                bool split = false) {
  const int32_t num_seqs = static_cast<int32_t>(offsets.size()) - 1;
  DeviceBuffer<int32_t> d_offsets(offsets.size());
  d_offsets.upload(offsets);
  const size_t capacity = WorkspaceLayout::capacity(num_seqs, total_tokens, block_size);
  DeviceBuffer<unsigned char> workspace(WorkspaceLayout::bytes(capacity, num_seqs));
  workspace.poison();
  ASSERT_EQ(cudaSuccess,
            schedule::build_block_schedule(d_offsets.get(), num_seqs, total_tokens, block_size, split, workspace.get(),
                                           capacity, nullptr, schedule::schedule_overlaps_its_neighbours()));
  auto raw = workspace.download();
  schedule::ScheduleHeader header;
  std::memcpy(&header, raw.data(), sizeof(header));
  EXPECT_EQ(header.num_seqs, num_seqs);
  EXPECT_EQ(header.block_size, block_size);
  EXPECT_EQ(header.split, split ? 1 : 0);
  if (!split) EXPECT_EQ(header.short_count, 0);
  // The claim counters start at zero (the workspace was poisoned).
  EXPECT_EQ(header.claims.next, 0);
  EXPECT_EQ(header.claims.finished, 0);
  void* ws = raw.data();
  std::vector<schedule::BlockSeq> want_seqs;
  if (split) {
    const auto want_blocks = reference::split_block_schedule(offsets, total_tokens, block_size, &want_seqs);
    expect_table(raw, header.block_count, WorkspaceLayout::table(ws), WorkspaceLayout::seq_table(ws, capacity),
                 want_blocks, want_seqs);
    expect_table(raw, header.block_count, WorkspaceLayout::tile_table(ws, capacity),
                 WorkspaceLayout::tile_seq_table(ws, capacity), want_blocks, want_seqs);
    for (const bool packed : {false, true}) {
      SCOPED_TRACE(packed ? "short tiles" : "short blocks");
      const auto want_short = reference::short_block_schedule(offsets, total_tokens, block_size, packed, &want_seqs);
      expect_table(raw, header.short_count,
                   packed ? WorkspaceLayout::short_tile_table(ws, capacity, num_seqs)
                          : WorkspaceLayout::short_table(ws, capacity),
                   packed ? WorkspaceLayout::short_tile_seq_table(ws, capacity, num_seqs)
                          : WorkspaceLayout::short_seq_table(ws, capacity, num_seqs),
                   want_short, want_seqs);
    }
    return;
  }
  const auto want_blocks = reference::block_schedule(offsets, total_tokens, block_size, &want_seqs);
  expect_table(raw, header.block_count, WorkspaceLayout::table(ws), WorkspaceLayout::seq_table(ws, capacity),
               want_blocks, want_seqs);
  const auto want_tiles = reference::tile_schedule(offsets, total_tokens, block_size, &want_seqs);
  expect_table(raw, header.block_count, WorkspaceLayout::tile_table(ws, capacity),
               WorkspaceLayout::tile_seq_table(ws, capacity), want_tiles, want_seqs);
}

TEST(ScheduleKernel, MatchesHostModel) {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  std::mt19937_64 rng = testing::test_rng();
  for (int num_seqs : {0, 1, 7, 1023, 1024, 1025, 3000, 4096, 4097, 8191, 8192, 8193, 20000, 131072, 131073, 300001}) {
    std::uniform_int_distribution<int32_t> len(0, 200);
    std::vector<int32_t> offsets{0};
    for (int b = 0; b < num_seqs; ++b)
      offsets.push_back(offsets.back() + len(rng));
    const int32_t total = offsets.back();
    const int32_t block_size = 32 << (num_seqs % 3);  // the schedule takes any block size
    SCOPED_TRACE("num_seqs=" + std::to_string(num_seqs) + " block_size=" + std::to_string(block_size));
    expect_device_matches_host(offsets, total, block_size);
    expect_device_matches_host(offsets, total, 128, /*split=*/true);
    // Malformed here and there: a few offsets raised past later ones (whose
    // running max then carries over sequences, and over range boundaries)
    // or lowered below earlier ones.
    std::vector<int32_t> spiked = offsets;
    std::uniform_int_distribution<int32_t> where(0, num_seqs), shift(1, 300000);
    for (int i = 0; i < 1 + num_seqs / 500; ++i) {
      int32_t& o = spiked[where(rng)];
      o = i % 2 == 0 ? o + shift(rng) : o - shift(rng);
    }
    expect_device_matches_host(spiked, total, block_size);
    expect_device_matches_host(spiked, total, 128, /*split=*/true);
    // Malformed: random values anywhere around [0, T].
    std::uniform_int_distribution<int32_t> any(-500, total + 500);
    for (auto& o : offsets)
      o = any(rng);
    expect_device_matches_host(offsets, total, block_size);
    expect_device_matches_host(offsets, total, 128, /*split=*/true);
  }
}

// Batches of mostly short sequences (0-70 tokens, and a few long ones): runs
// of packed tiles across the 32-sequence packing groups and the first
// pass's chunks (1024 and 8192 sequences), every block size.
TEST(ScheduleKernel, PacksShortSequencesLikeHostModel) {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  std::mt19937_64 rng = testing::test_rng();
  for (int num_seqs : {1, 2, 63, 1024, 1500, 5000, 8193, 20000})
    for (int32_t block_size : {32, 64, 128}) {
      std::uniform_int_distribution<int32_t> len(0, 70), rare(0, 99);
      std::vector<int32_t> offsets{0};
      for (int b = 0; b < num_seqs; ++b)
        offsets.push_back(offsets.back() + (rare(rng) == 0 ? 300 : len(rng)));
      SCOPED_TRACE("num_seqs=" + std::to_string(num_seqs) + " block_size=" + std::to_string(block_size));
      expect_device_matches_host(offsets, offsets.back(), block_size);
      if (block_size == 128) expect_device_matches_host(offsets, offsets.back(), block_size, /*split=*/true);
    }
}

}  // namespace
}  // namespace blockattn
