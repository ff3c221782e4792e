// blockattn layer: one projection of the token features, then block attention
// on its column slices (library blockattn::layer, over blockattn and cuBLASLt).
//
//   z   = x W^T + b                       [T, N], N = (Hq + 2 Hkv) D; bias in the GEMM's epilogue
//   q, k, v = columns [0, Hq D), [Hq D, (Hq + Hkv) D), [(Hq + Hkv) D, N) of z, read in place
//   out = attention(q, k, v)              [T, Hq, D], with LayerInputs' rotary, scale and backend
// Backward: the attention backward writes dq, dk, dv (rotated back) into the
// matching columns of one dz [T, N]; then dx = dz W and dW = dz^T x, with
// db = sum_t dz in the second GEMM's epilogue.
//
// Every matrix is row-major and contiguous; W is in nn.Linear's [N, C] layout.
// offsets must cover [0, T) (offsets[0] == 0, offsets[B] == T): dz has no
// values for rows outside every sequence. Same conventions as blockattn.h:
// arguments are checked on the host, nothing is launched when they are
// invalid, the host never synchronizes.
#pragma once

#include "blockattn/blockattn.h"

namespace blockattn {

struct LayerShape {
  int64_t num_seqs = 0;      // B
  int64_t total_tokens = 0;  // T
  int in_features = 0;       // C
  int num_q_heads = 0;       // Hq
  int num_kv_heads = 0;      // Hkv
  int head_dim = 0;          // D
  DType dtype = DType::kBF16;
  int block_size = kDefaultBlockSize;

  // N: the projection's width.
  int64_t projection_width() const { return static_cast<int64_t>(num_q_heads + 2 * num_kv_heads) * head_dim; }
};

struct LayerInputs {
  LayerShape shape;
  const int32_t* offsets = nullptr;  // device, [B + 1]
  const void* x = nullptr;           // [T, C]
  const void* weight = nullptr;      // [N, C]
  const void* bias = nullptr;        // [N], or null
  Options options;
  Rotary rotary;
};

struct LayerForwardArgs : LayerInputs {
  void* z = nullptr;    // output [T, N]: the projection, which the backward reads
  void* out = nullptr;  // output [T, Hq, D]
};

struct LayerBackwardArgs : LayerInputs {
  const void* z = nullptr;     // the forward's projection
  const void* dout = nullptr;  // [T, Hq, D]
  void* dz = nullptr;          // scratch [T, N]: dq, dk, dv side by side
  void* dx = nullptr;          // output [T, C]
  void* dweight = nullptr;     // output [N, C]
  void* dbias = nullptr;       // output [N]; null exactly when bias is null
};

// Device scratch for layer_forward/layer_backward: the attention's block
// schedule plus cuBLASLt's workspace. Passing the forward's workspace to the
// backward with options.reuse_schedule skips rebuilding the schedule.
BLOCKATTN_API size_t layer_workspace_size(int64_t num_seqs, int64_t total_tokens);

BLOCKATTN_API Status layer_forward(const LayerForwardArgs& args, void* workspace, size_t workspace_bytes,
                                   cudaStream_t stream);
BLOCKATTN_API Status layer_backward(const LayerBackwardArgs& args, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream);

}  // namespace blockattn
