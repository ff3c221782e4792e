// The device schedule kernel against its host model, across the 1024-sequence
// chunk boundary and on malformed offsets.
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

void expect_device_matches_host(const std::vector<int32_t>& offsets, int32_t total_tokens, int32_t block_size) {
  const int32_t num_seqs = static_cast<int32_t>(offsets.size()) - 1;
  DeviceBuffer<int32_t> d_offsets(offsets.size());
  d_offsets.upload(offsets);
  const size_t capacity = WorkspaceLayout::capacity(num_seqs, total_tokens, block_size);
  DeviceBuffer<unsigned char> workspace(WorkspaceLayout::bytes(capacity));
  workspace.poison();
  ASSERT_EQ(cudaSuccess, schedule::build_block_schedule(d_offsets.get(), num_seqs, total_tokens, block_size,
                                                        workspace.get(), capacity, nullptr));
  const auto raw = workspace.download();
  int32_t count;
  std::memcpy(&count, raw.data(), sizeof(count));
  std::vector<schedule::BlockSeq> want_seqs;
  const auto want = reference::block_schedule(offsets, total_tokens, block_size, &want_seqs);
  ASSERT_EQ(count, static_cast<int32_t>(want.size()));
  const auto* table = reinterpret_cast<const BlockDesc*>(raw.data() + WorkspaceLayout::kHeaderBytes);
  const auto* seqs = reinterpret_cast<const schedule::BlockSeq*>(table + capacity);
  for (int32_t i = 0; i < count; ++i) {
    ASSERT_EQ(table[i].row_begin, want[i].row_begin) << "block " << i;
    ASSERT_EQ(table[i].row_count, want[i].row_count) << "block " << i;
    ASSERT_EQ(seqs[i].seq, want_seqs[i].seq) << "block " << i;
    ASSERT_EQ(seqs[i].first_pos, want_seqs[i].first_pos) << "block " << i;
  }
}

TEST(ScheduleKernel, MatchesHostModel) {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  std::mt19937_64 rng = testing::test_rng();
  for (int num_seqs : {0, 1, 7, 1023, 1024, 1025, 3000}) {
    std::uniform_int_distribution<int32_t> len(0, 200);
    std::vector<int32_t> offsets{0};
    for (int b = 0; b < num_seqs; ++b)
      offsets.push_back(offsets.back() + len(rng));
    const int32_t total = offsets.back();
    const int32_t block_size = 32 << (num_seqs % 3);  // the schedule takes any block size
    SCOPED_TRACE("num_seqs=" + std::to_string(num_seqs) + " block_size=" + std::to_string(block_size));
    expect_device_matches_host(offsets, total, block_size);
    // Malformed: random values anywhere around [0, T].
    std::uniform_int_distribution<int32_t> any(-500, total + 500);
    for (auto& o : offsets)
      o = any(rng);
    expect_device_matches_host(offsets, total, block_size);
  }
}

}  // namespace
}  // namespace blockattn
