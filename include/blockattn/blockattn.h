// blockattn: block-diagonal jagged self-attention for NVIDIA GPUs.
//
// Semantics (see docs/semantics.md for the full contract):
//   q is [T, Hq, D], k and v are [T, Hkv, D], Hq a multiple of Hkv.
//   offsets is int32 [B + 1] on the device: sequence b is tokens
//   [offsets[b], offsets[b+1]). Each sequence is cut into blocks of kBlockSize
//   tokens starting at its first token (the last block may be shorter); a query
//   attends to exactly the keys of its own block:
//     out[i] = softmax(scale * q_i . K_blk^T) . V_blk,  scale = 1/sqrt(D) by default.
//   Accumulation and softmax are fp32; tensors are bf16 or fp16.
//
// Every entry point validates its arguments on the host without touching device
// memory, launches nothing when they are invalid, never synchronizes the host
// and never copies offsets to the host, so calls can be captured in CUDA graphs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#if defined(__GNUC__)
#define BLOCKATTN_API __attribute__((visibility("default")))
#else
#define BLOCKATTN_API
#endif

namespace blockattn {

// Tokens per attention block. The kernels are written against this constant.
inline constexpr int kBlockSize = 64;

enum class DType { kBF16 = 0, kFP16 = 1 };

// Which implementation runs (forward and backward alike).
//   kAuto:     the sm_90 path (TMA, wgmma) on compute capability 9.0 when the
//              tensors' layout allows TMA, else the portable path; the backward
//              takes the sm_90 path only for head_dim 128 without grouped
//              queries (where it measured fastest). The
//              environment variable BLOCKATTN_FORCE_PORTABLE=1 turns kAuto into
//              kPortable (for tests and comparisons).
//   kPortable: the sm_80+ path (mma.sync), on any supported GPU.
//   kHopper:   the sm_90 path; kUnsupported where it cannot run (TMA-incompatible
//              strides, or a grouped-query backward).
enum class Backend { kAuto = 0, kPortable = 1, kHopper = 2 };

enum class StatusCode {
  kOk = 0,
  kInvalidArgument = 1,  // a caller error; the message names the argument
  kUnsupported = 2,      // valid request this build/device cannot serve
  kCudaError = 3,        // the CUDA runtime reported an error
};

struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;  // empty when ok

  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
};

// A [T, H, D] tensor view: element (t, h, d) lives at
// data + t * token_stride + h * head_stride + d. Strides are in elements; the
// last dimension is contiguous.
struct TensorView {
  void* data = nullptr;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

// Sizes shared by forward and backward.
struct Shape {
  int64_t num_seqs = 0;      // B
  int64_t total_tokens = 0;  // T
  int num_q_heads = 0;       // Hq
  int num_kv_heads = 0;      // Hkv
  int head_dim = 0;          // D: 64 or 128
  DType dtype = DType::kBF16;
};

struct Options {
  // Softmax scale; 0 means 1/sqrt(head_dim). Must be finite.
  float softmax_scale = 0.f;
  Backend backend = Backend::kAuto;
};

struct ForwardArgs {
  Shape shape;
  const int32_t* offsets = nullptr;  // device, [num_seqs + 1]
  TensorView q, k, v;                // inputs
  TensorView out;                    // output, [T, Hq, D]
  Options options;
};

struct BackwardArgs {
  Shape shape;
  const int32_t* offsets = nullptr;  // device, [num_seqs + 1]
  TensorView q, k, v, dout;          // inputs (dout is [T, Hq, D])
  TensorView dq, dk, dv;             // outputs; dk and dv sum over each KV group
  Options options;
};

// Bytes of device scratch that forward/backward need for this many sequences
// and tokens (the on-device block schedule). Pass at least this much.
BLOCKATTN_API size_t workspace_size(int64_t num_seqs, int64_t total_tokens);

// out = attention(q, k, v). Runs on the current device, asynchronously on
// `stream`, which must belong to that device.
BLOCKATTN_API Status forward(const ForwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Which implementation forward() would run for these arguments on the current
// device (kPortable or kHopper), after the same validation; launches nothing.
BLOCKATTN_API Status forward_backend(const ForwardArgs& args, Backend* chosen);

// The same for backward().
BLOCKATTN_API Status backward_backend(const BackwardArgs& args, Backend* chosen);

// dq, dk, dv of the forward above given dout. A single kernel: it recomputes the
// probabilities, needs neither the forward output nor its logsumexp, and is
// deterministic (no atomics).
BLOCKATTN_API Status backward(const BackwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream);

BLOCKATTN_API const char* dtype_name(DType dtype);

}  // namespace blockattn
