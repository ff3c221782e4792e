// The kernel arguments every backend and operation shares, resolved on the
// host from the problem: head counts, the softmax scale (and its log2(e)
// multiple for exp2), the device schedule and the rotary description.
#pragma once

#include "core/problem.h"
#include "schedule/block_schedule.h"

namespace blockattn {

// Rotary (blockattn::Rotary) as the kernels read it; only the kernels built
// with core::Fusion::kRotary look at it.
struct RotaryParams {
  const void* cos;
  const void* sin;
  int64_t cos_row_stride, sin_row_stride;  // elements
  int64_t num_positions;
  const int32_t* seq_start;  // null: every sequence starts at 0
  int32_t half;              // rotary_dim / 2: pairs per head vector
  TableType table_type;
  bool half_split;   // pairs (j, j + half), else (2j, 2j + 1)
  bool in_sequence;  // position = index in its sequence (+ seq_start), else the token's row
  bool rotate_v;
  bool vector_loads;  // both tables' bases and row strides are 16-byte aligned
};

struct AttentionParams {
  int num_q_heads;
  int group_size;  // Hq / Hkv
  float softmax_scale;
  float scale_log2;  // softmax_scale * log2(e)
  schedule::Schedule schedule;
  RotaryParams rotary;
};

inline RotaryParams rotary_params(const Rotary& r) {
  return {r.cos,
          r.sin,
          r.cos_row_stride,
          r.sin_row_stride,
          r.num_positions,
          r.seq_start,
          r.rotary_dim / 2,
          r.table_type,
          r.pairs == RotaryPairs::kHalfSplit,
          r.positions == RotaryPositions::kInSequence,
          r.rotate_v,
          core::rows_16_byte_aligned(r.cos, r.cos_row_stride, r.table_type) &&
              core::rows_16_byte_aligned(r.sin, r.sin_row_stride, r.table_type)};
}

inline AttentionParams attention_params(const core::Problem& p, const schedule::Schedule& s) {
  const float scale = p.resolved_scale();
  return {p.shape.num_q_heads, p.group_size(), scale, scale * 1.4426950408889634f, s, rotary_params(p.rotary)};
}

}  // namespace blockattn
