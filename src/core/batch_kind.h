// Batches of short sequences: those whose sequences average under one block,
// so that most tiles are partial and each tile's latency rather than its bytes
// bounds a kernel. Two decisions follow it: a table row may carry a second
// kernel for such batches (KernelOf<...>::ShortSequences,
// common/kernel_launcher.cuh), and a row may be chosen by kAuto for them only
// (AutoUse::kShortBatches, core/kernel_table.h). Computed from the shape
// alone: no look at the offsets, no synchronization.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace blockattn {

enum class BatchKind { kLong, kShort };

// A backward whose query heads are grouped (num_q_heads != num_kv_heads):
// a row may serve it with a kernel of its own (KernelOf<...>::Grouped), and
// kAuto may take a row for it (AutoUse::kShortGroupedOrFastMemory).
inline bool grouped_backward(const core::Problem& p) {
  return p.operation == Operation::kBackward && p.shape.num_q_heads != p.shape.num_kv_heads;
}

inline BatchKind batch_kind(const core::Problem& p) {
  return p.shape.total_tokens < static_cast<int64_t>(p.shape.num_seqs) * p.shape.block_size ? BatchKind::kShort
                                                                                            : BatchKind::kLong;
}

}  // namespace blockattn
