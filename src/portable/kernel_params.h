// Arguments of the portable kernels, resolved on the host from the public API
// structs (strides in elements, scale folded with log2(e) for exp2).
#pragma once

#include <cstdint>

#include "schedule/block_schedule.h"

namespace blockattn::portable {

struct Strided {
  void* data;
  int64_t token_stride;
  int64_t head_stride;
};

struct KernelParams {
  Strided q, k, v, out;      // forward: out; backward: out unused
  Strided dout, dq, dk, dv;  // backward only
  int num_q_heads;
  int group_size;  // Hq / Hkv
  float softmax_scale;
  float scale_log2;            // softmax_scale * log2(e)
  const int32_t* block_count;  // from the schedule kernel
  const schedule::BlockDesc* blocks;
};

// Launches the kernel for dtype T and head dim D on `num_ctas` persistent CTAs.
// Defined in forward_<dtype>.cu / backward_<dtype>.cu.
template <typename T, int D>
cudaError_t launch_forward(const KernelParams& p, int num_ctas, cudaStream_t stream);
template <typename T, int D>
cudaError_t launch_backward(const KernelParams& p, int num_ctas, cudaStream_t stream);

// Resident CTAs per SM of each kernel on the current device (occupancy query,
// also raises the dynamic shared-memory limit once per device).
template <typename T, int D>
int forward_ctas_per_sm();
template <typename T, int D>
int backward_ctas_per_sm();

}  // namespace blockattn::portable
