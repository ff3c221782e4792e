// The kind of batch, from the mean sequence length: shorter than a block
// (most tiles partial, so each tile's latency rather than its bytes bounds a
// kernel), a few blocks (about one tile in three partial), many blocks (a
// CTA's walk mostly whole tiles, few of them partial), or between. Two
// decisions follow it: a table row may carry other kernels for such batches
// (KernelOf<...>::ShortSequences, ::FewBlocks and ::ManyBlocks,
// common/kernel_launcher.cuh), and a row may be chosen by kAuto for some
// kinds only (AutoUse, core/kernel_table.h). Computed from the shape alone:
// no look at the offsets, no synchronization.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace blockattn {

namespace core {
// What kernel choices read of the device: its memory's peak bandwidth in
// GB/s (core::memory_peak_gbps(); 0 when unknown, read as slow). At or past
// kFastMemoryGBps (an H200's 4.8 TB/s; an H100's is 3.35) a kernel must keep
// more bytes in flight to keep the memory busy, and the measured choice
// changes: the portable D = 64 backward falls from 86% of copy on an H100 to
// 73% on an H200, where the sm90 one keeps 86% (docs/perf.md, "kAuto by
// memory peak"); the FewBlocks kernels below lead on an H100 and trail by
// 18-22 points on an H200, while the ManyBlocks kernel leads on both.
struct DeviceTraits {
  int memory_peak_gbps = 0;
};
inline constexpr int kFastMemoryGBps = 4000;
}  // namespace core

enum class BatchKind { kLong, kFewBlocks, kManyBlocks, kShort };

// The problems whose sm_90 row has the grouped kernel's ring forms for a
// group of one (the backward at 64-token blocks, no rotary: what
// sm90::grouped_backward_kernel() holds for), the only ones a batch can be
// kFewBlocks or kManyBlocks for.
constexpr bool has_ring_forms(Operation op, int block_size, bool rotary) {
  return op == Operation::kBackward && block_size == 64 && !rotary;
}

// Twice the mean blocks per sequence under which a batch is kFewBlocks, for
// the problems that have a FewBlocks kernel (0: none). The sm_90 backward
// at D = 64 and 128 (64-token blocks, no rotary) runs such batches on its
// grouped kernel's ring, a group of one: measured on the H100 against the
// per-tile kernels, it leads by 5-8 points of copy bandwidth where sequences
// average 2.1 blocks (and 2.8 at D = 128), and trails by 2-9 where they
// average 4 or more; on an H200 (fast memory) it trails the per-tile kernel
// by 18-22 points even there, so such batches are long on fast memory
// (docs/perf.md, "The MHA backward on the grouped kernel's ring, for
// sequences of a few blocks").
constexpr int few_blocks_limit_x2(Operation op, int head_dim, int block_size, bool rotary) {
  if (!has_ring_forms(op, block_size, rotary)) return 0;
  return head_dim == 64 ? 5 : head_dim == 128 ? 7 : 0;
}

// Twice the mean blocks per sequence from which a batch is kManyBlocks, for
// the problems that have a ManyBlocks kernel (0: none): the sm_90 backward
// at D = 64 (64-token blocks, no rotary) runs such batches on its grouped
// kernel's ring, a group of one, with each consumer walking its own units.
// Measured on the H100 against the portable kernel, which kAuto takes for
// long MHA batches at D = 64 on slower memory: with heads in pairs it leads
// by 3-5 points of copy bandwidth where sequences average 8 blocks or more,
// and still trails by 1.5-4 on the sweep's shorter lengths
// (sweep-d64-L256-f0.7, L512-f0.5, L512-f0.7): partial tiles unbalance the
// consumers' walks. On an H200 it leads the sm_90 per-tile kernel,
// which kAuto takes there, by 1-5 points at 8 to 32 blocks, so fast memory
// has it too (docs/perf.md, "The alternate-units ring on walks of its own"
// and "Heads in pairs").
constexpr int many_blocks_min_x2(Operation op, int head_dim, int block_size, bool rotary) {
  if (!has_ring_forms(op, block_size, rotary)) return 0;
  return head_dim == 64 ? 16 : 0;
}

// A problem whose query heads are grouped (num_q_heads != num_kv_heads): a
// row may serve it with a kernel of its own (KernelOf<...>::Grouped).
inline bool grouped_heads(const core::Problem& p) { return p.shape.num_q_heads != p.shape.num_kv_heads; }

// A backward whose query heads are grouped: kAuto may take a row for it
// (AutoUse::kExceptLongMhaOnSlowMemory).
inline bool grouped_backward(const core::Problem& p) { return p.operation == Operation::kBackward && grouped_heads(p); }

inline BatchKind batch_kind(const core::Problem& p, const core::DeviceTraits& device = {}) {
  if (p.short_blocks) return BatchKind::kShort;
  const int64_t block_tokens = static_cast<int64_t>(p.shape.num_seqs) * p.shape.block_size;
  if (p.shape.total_tokens < block_tokens) return BatchKind::kShort;
  const bool rotary = p.fusion() == core::Fusion::kRotary;
  const bool fast_memory = device.memory_peak_gbps >= core::kFastMemoryGBps;  // FewBlocks kernels trail there
  const int limit = fast_memory ? 0 : few_blocks_limit_x2(p.operation, p.shape.head_dim, p.shape.block_size, rotary);
  if (2 * p.shape.total_tokens < limit * block_tokens) return BatchKind::kFewBlocks;
  const int many = many_blocks_min_x2(p.operation, p.shape.head_dim, p.shape.block_size, rotary);
  if (many > 0 && 2 * p.shape.total_tokens >= many * block_tokens) return BatchKind::kManyBlocks;
  return BatchKind::kLong;
}

// Whether a grouped-query problem takes its row's Grouped kernel, where the
// row has one: every backward; every forward but a batch of short
// sequences whose groups are under eight query heads, where the sm_90
// per-tile forward's packed tiles read faster than the grouped forward
// (H200, % of copy: 20,000 sequences of 1-63 tokens at D = 64, 8 query
// heads on 2 KV heads, 60.9-61.6 against 57.9-58.1; on 1 KV head 56.3-56.6
// against 58.3-58.7; docs/perf.md, "Session 62").
inline bool takes_grouped_kernel(const core::Problem& p, BatchKind batch) {
  if (!grouped_heads(p)) return false;
  return p.operation == Operation::kBackward || batch != BatchKind::kShort ||
         p.shape.num_q_heads >= 8 * p.shape.num_kv_heads;
}

}  // namespace blockattn
