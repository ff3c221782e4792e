// Arguments of the sm_90 kernels and their host entry points.
#pragma once

#include <cuda.h>

#include "portable/kernel_params.h"

namespace blockattn::hopper {

struct ForwardParams {
  CUtensorMap q_map, k_map, v_map;  // TMA maps (64-byte aligned by their type)
  portable::Strided out;            // written with plain stores, never past a block end
  int num_q_heads;
  int group_size;
  float scale_log2;
  const int32_t* block_count;
  const schedule::BlockDesc* blocks;
};

struct BackwardParams {
  CUtensorMap q_map, k_map, v_map, dout_map;  // TMA maps
  portable::Strided dq, dk, dv;               // written with plain stores, never past a block end
  int num_heads;                              // Hq == Hkv on this path
  float softmax_scale;
  float scale_log2;
  const int32_t* block_count;
  const schedule::BlockDesc* blocks;
};

// Rows of a TMA box: one 64-token block.
inline constexpr uint32_t kBoxRows = kBlockSize;

// Defined in {forward,backward}_<dtype>.cu for D in {64, 128}. ctas_per_sm()
// is 0 if the runtime refused the kernel's configuration.
template <typename T, int D>
int forward_ctas_per_sm();
template <typename T, int D>
cudaError_t launch_forward(const ForwardParams& p, int num_ctas, cudaStream_t stream);
template <typename T, int D>
int backward_ctas_per_sm();
template <typename T, int D>
cudaError_t launch_backward(const BackwardParams& p, int num_ctas, cudaStream_t stream);

}  // namespace blockattn::hopper
