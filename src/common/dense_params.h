// The kernel arguments every dense-forward kernel shares, resolved on the
// host (plain C++: backends include it from .cpp files). The work-unit order
// they describe is decoded on the device by tile/dense_schedule.cuh.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dense_problem.h"

namespace blockattn {

struct DenseAttnParams {
  int seq_len;
  int num_q_heads;
  int group_size;      // Hq / Hkv: query head h reads kv head h / group_size
  int num_m_blocks;    // query-row blocks per (batch, head)
  int batch_heads;     // B * Hq
  int section_heads;   // (batch, head) pairs per scheduling section (see tile/dense_schedule.cuh)
  int pairs_per_head;  // ceil(num_m_blocks / 2): work items per (batch, head)
  int num_items;       // batch_heads * pairs_per_head: what persistent CTAs stride over
  bool causal;
  float scale_log2;  // softmax scale * log2(e)
  float* lse;        // [B, Hq, S] or null
  // Rows block 0 starts before row 0 (see dense_attn_params). Last, so that
  // the other fields keep their offsets and the kernels without a causal
  // mask compile to the same code as before it (placed after num_m_blocks,
  // it moved them, and the D = 64 full kernel measured 3% slower in one
  // run: docs/perf.md, "Session 41").
  int row_shift;
};

// The (batch, head) pairs whose K and V together stay under this many bytes
// are scheduled side by side, so their key tiles are re-read from L2 rather
// than from memory (H100: 50 MB of L2).
inline constexpr int64_t kDenseL2SectionBytes = 24ll << 20;

// rows_per_unit: query rows of a work unit. shift_step: with a causal mask,
// the partial row block (S not a multiple of rows_per_unit) goes first,
// starting up to rows_per_unit - 1 rows before row 0 in steps of shift_step
// rows that a kernel skips whole (the sm90 kernel's consumer warpgroups),
// because block 0 sees the fewest keys: its idle rows then cost one key
// tile, not the longest row's (hdim64_seq4k: 64 of 192 rows busy over 32
// tiles). 0 keeps blocks from row 0 (the sm80 kernel, whose loads start at
// the unit's first row).
inline DenseAttnParams dense_attn_params(const core::DenseProblem& p, int rows_per_unit, int shift_step = 0) {
  const DenseShape& s = p.shape;
  DenseAttnParams a{};
  a.seq_len = static_cast<int>(s.seq_len);
  a.num_q_heads = s.num_q_heads;
  a.group_size = s.num_q_heads / s.num_kv_heads;
  const int partial = a.seq_len % rows_per_unit;
  a.row_shift = p.causal && shift_step > 0 && partial > 0 ? (rows_per_unit - partial) / shift_step * shift_step : 0;
  a.num_m_blocks = static_cast<int>((s.seq_len + a.row_shift + rows_per_unit - 1) / rows_per_unit);
  a.batch_heads = static_cast<int>(s.batch * s.num_q_heads);
  const int64_t kv_bytes_per_head = 2 * s.seq_len * s.head_dim * 2;
  a.section_heads = static_cast<int>(
      std::clamp<int64_t>(kDenseL2SectionBytes / std::max<int64_t>(kv_bytes_per_head, 1), 1, a.batch_heads));
  a.pairs_per_head = (a.num_m_blocks + 1) / 2;
  a.num_items = a.batch_heads * a.pairs_per_head;
  a.causal = p.causal;
  a.scale_log2 = p.resolved_scale() * 1.4426950408889634f;
  a.lse = p.lse;
  return a;
}

}  // namespace blockattn
