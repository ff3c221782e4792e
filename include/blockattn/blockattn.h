// blockattn: block-diagonal jagged self-attention for NVIDIA GPUs.
//
// Semantics (see docs/semantics.md for the full contract):
//   q is [T, Hq, D], k and v are [T, Hkv, D], Hq a multiple of Hkv.
//   offsets is int32 [B + 1] on the device: sequence b is tokens
//   [offsets[b], offsets[b+1]). Each sequence is cut into blocks of
//   Shape::block_size tokens starting at its first token (the last block may be
//   shorter); a query attends to exactly the keys of its own block:
//     out[i] = softmax(scale * q_i . K_blk^T) . V_blk,  scale = 1/sqrt(D) by default.
//   Accumulation and softmax are fp32; tensors are bf16 or fp16.
//
// Which head dims and block sizes a build serves is a table, not a rule:
// supported_configs() lists it, and a request outside it fails with a message
// naming what was asked and what exists.
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

// Tokens per attention block when Shape::block_size is left at its default.
inline constexpr int kDefaultBlockSize = 64;

// Tensor data pointers must be aligned to this many bytes, and token and head
// strides must be multiples of it (in bytes): rows move in 16-byte vectors.
inline constexpr int kTensorAlignmentBytes = 16;

enum class DType { kBF16 = 0, kFP16 = 1 };

enum class Operation { kForward = 0, kBackward = 1 };

// Which implementation runs (forward and backward alike).
//   kAuto:     the first implementation, in the order kHopper, kPortable, that
//              supports the call and whose table row is marked for automatic
//              use (supported_configs()). The environment variable
//              BLOCKATTN_FORCE_PORTABLE set to anything but "" or "0" turns
//              kAuto into kPortable (for tests and comparisons).
//   kPortable: the sm_80+ path (mma.sync), on any supported GPU.
//   kHopper:   the sm_90a path (TMA, wgmma); kUnsupported, with the reason,
//              where it cannot run the call.
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
// last dimension is contiguous. The kernels read this struct as it is.
struct TensorView {
  void* data = nullptr;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

struct Shape {
  int64_t num_seqs = 0;      // B
  int64_t total_tokens = 0;  // T
  int num_q_heads = 0;       // Hq
  int num_kv_heads = 0;      // Hkv
  int head_dim = 0;          // D: one of supported_configs()' head dims
  DType dtype = DType::kBF16;
  int block_size = kDefaultBlockSize;  // tokens per attention block
};

struct Options {
  // Softmax scale; 0 means 1/sqrt(head_dim). Must be finite and not negative.
  float softmax_scale = 0.f;
  Backend backend = Backend::kAuto;
  // The workspace already holds the block schedule of these offsets, built by
  // an earlier call with the same num_seqs, total_tokens and block_size on the
  // same stream (e.g. the forward before this backward): skip rebuilding it.
  // The kernels check those sizes on the device and do nothing if they differ
  // (outputs untouched, never an access outside the tensors); offsets whose
  // content changed in between give results for the old offsets.
  bool reuse_schedule = false;
};

// Rotary position embeddings applied inside the kernels (docs/semantics.md,
// "Rotary"). A head vector x is rotated in pairs of channels below
// rotary_dim, by angle theta_j of pair j < rotary_dim / 2:
//   y_a = x_a cos(theta_j) - x_b sin(theta_j),  y_b = x_b cos(theta_j) + x_a sin(theta_j)
// with pairs (2j, 2j + 1) (kInterleaved, GPT-J) or (j, j + rotary_dim / 2)
// (kHalfSplit, NeoX/Llama). Channels >= rotary_dim pass through. The forward
// attends with the rotated q, k (and v); the backward returns gradients of the
// unrotated inputs. Nothing rotated is ever written to memory.
enum class RotaryPairs { kInterleaved = 0, kHalfSplit = 1 };
// Which table row a token reads: its row in the jagged tensor, or its index in
// its own sequence plus the sequence's start (seq_start[b], 0 when null).
enum class RotaryPositions { kTokenRow = 0, kInSequence = 1 };
// Element type of the cos and sin tables.
enum class TableType { kFloat32 = 0, kBF16 = 1, kFP16 = 2 };

struct Rotary {
  int rotary_dim = 0;  // r: 0 = no rotary; else even, <= head_dim (a multiple of 16 for kHalfSplit)
  RotaryPairs pairs = RotaryPairs::kHalfSplit;
  RotaryPositions positions = RotaryPositions::kInSequence;
  bool rotate_v = false;  // also rotate v (the output then stays in the rotated frame)
  // cos and sin tables [num_positions, rotary_dim / 2] on the device, rows
  // *_row_stride elements apart, elements contiguous. A position outside
  // [0, num_positions) is angle 0 (identity), never read.
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t cos_row_stride = 0, sin_row_stride = 0;
  int64_t num_positions = 0;
  TableType table_type = TableType::kFloat32;
  const int32_t* seq_start = nullptr;  // kInSequence only: device, [num_seqs], or null (all 0)

  bool enabled() const { return rotary_dim != 0; }
};

// What forward and backward both take.
struct AttentionInputs {
  Shape shape;
  const int32_t* offsets = nullptr;  // device, [num_seqs + 1]
  TensorView q, k, v;
  Options options;
  Rotary rotary;  // off by default
};

struct ForwardArgs : AttentionInputs {
  TensorView out;  // [T, Hq, D]
};

struct BackwardArgs : AttentionInputs {
  TensorView dout;        // input, [T, Hq, D]
  TensorView dq, dk, dv;  // outputs; dk and dv sum over each KV group
};

// One row of the table of kernels this build contains.
struct KernelConfig {
  Backend backend;  // kPortable or kHopper
  Operation operation;
  DType dtype;
  int head_dim;
  int block_size;
  bool automatic;  // whether kAuto may choose it (false where another path measured faster)
  bool rotary;     // whether this kernel applies Rotary (AttentionInputs::rotary)
};

// The table; `*count` receives its length. The storage is static.
BLOCKATTN_API const KernelConfig* supported_configs(size_t* count);

// Bytes of device scratch that forward/backward need for this many sequences
// and tokens (the on-device block schedule, and counters the kernels claim
// their tiles from), at any supported block size. Calls over one workspace
// must be ordered (one stream, or synchronized): two at the same time would
// share its schedule and its counters.
BLOCKATTN_API size_t workspace_size(int64_t num_seqs, int64_t total_tokens);

// out = attention(q, k, v). Runs on the current device, asynchronously on
// `stream`, which must belong to that device.
BLOCKATTN_API Status forward(const ForwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// dq, dk, dv of the forward above given dout. A single kernel: it recomputes the
// probabilities, needs neither the forward output nor its logsumexp, and is
// deterministic (no atomics).
BLOCKATTN_API Status backward(const BackwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Which implementation forward()/backward() would run for these arguments on
// the current device (kPortable or kHopper), after the same validation;
// launches nothing.
BLOCKATTN_API Status forward_backend(const ForwardArgs& args, Backend* chosen);
BLOCKATTN_API Status backward_backend(const BackwardArgs& args, Backend* chosen);

// The library's version, "major.minor.patch".
BLOCKATTN_API const char* version();

BLOCKATTN_API const char* dtype_name(DType dtype);
BLOCKATTN_API const char* backend_name(Backend backend);
BLOCKATTN_API const char* operation_name(Operation operation);

}  // namespace blockattn
