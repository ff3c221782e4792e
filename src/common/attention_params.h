// The kernel arguments every backend and operation shares, resolved on the
// host from the problem: head counts, the softmax scale (and its log2(e)
// multiple for exp2), and the device schedule.
#pragma once

#include "core/problem.h"
#include "schedule/block_schedule.h"

namespace blockattn {

struct AttentionParams {
  int num_q_heads;
  int group_size;  // Hq / Hkv
  float softmax_scale;
  float scale_log2;  // softmax_scale * log2(e)
  schedule::Schedule schedule;
};

inline AttentionParams attention_params(const core::Problem& p, const schedule::Schedule& s) {
  const float scale = p.resolved_scale();
  return {p.shape.num_q_heads, p.group_size(), scale, scale * 1.4426950408889634f, s};
}

}  // namespace blockattn
