// blockattn dense attention: the flash-attention forward over [B, H, S, D]
// tensors, causal or not, with grouped-query heads (docs/semantics.md,
// "Dense attention").
//
//   out[b, h, i] = softmax(scale * q[b, h, i] . K[b, g]^T + mask) . V[b, g],
//   g = h / (Hq / Hkv), scale = 1/sqrt(D) by default,
//   mask[i, j] = -inf where j > i (causal), 0 otherwise.
//   lse[b, h, i] = log(sum_j exp(scale * q . k_j + mask)) (natural log), when asked for.
// Accumulation and softmax are fp32 (exp2 with the scale folded in); tensors
// are bf16 or fp16. Shares Status, DType and Backend with blockattn.h, and
// the same discipline: every argument is checked on the host, nothing is
// launched on bad input, the host never waits, calls can be captured in CUDA
// graphs, and no workspace is needed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "blockattn/blockattn.h"

namespace blockattn {

// A [B, H, S, D] view: element (b, h, s, d) lives at
//   data + b * batch_stride + h * head_stride + s * seq_stride + d
// (strides in elements, each a multiple of 8: 16 bytes; the last dimension is
// contiguous). PyTorch's (B, H, S, D) tensors and transposed (B, S, H, D)
// ones alike.
struct DenseTensorView {
  void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t seq_stride = 0;
};

struct DenseShape {
  int64_t batch = 0;    // B
  int64_t seq_len = 0;  // S, of queries and keys alike; at most 2^30
  int num_q_heads = 0;  // Hq
  int num_kv_heads = 0; // Hkv, dividing Hq
  int head_dim = 0;     // D: one of dense_configs()' head dims
  DType dtype = DType::kBF16;
};

struct DenseForwardArgs {
  DenseShape shape;
  DenseTensorView q;    // [B, Hq, S, D]
  DenseTensorView k, v; // [B, Hkv, S, D]
  DenseTensorView out;  // [B, Hq, S, D], must not overlap an input
  // Optional output: [B, Hq, S] fp32, contiguous, 4-byte aligned; null = not written.
  float* lse = nullptr;
  bool causal = false;
  float softmax_scale = 0.f;  // 0 = 1/sqrt(head_dim); must be finite
  Backend backend = Backend::kAuto;
};

// One row of the dense kernel table (src/kernel_table.cmake); every row
// serves causal and non-causal calls.
struct DenseKernelConfig {
  Backend backend;  // kPortable or kHopper
  DType dtype;
  int head_dim;
  bool automatic;  // whether kAuto may choose it
};

BLOCKATTN_API const DenseKernelConfig* dense_configs(size_t* count);

// out (and lse) = dense attention of q, k, v, on the current device,
// asynchronously on `stream`.
BLOCKATTN_API Status dense_forward(const DenseForwardArgs& args, cudaStream_t stream);

// Which implementation dense_forward() would run (kPortable or kHopper),
// after the same validation; launches nothing.
BLOCKATTN_API Status dense_forward_backend(const DenseForwardArgs& args, Backend* chosen);

}  // namespace blockattn
