// The fused projection layer (blockattn/layer.h): cuBLASLt GEMMs around the
// public attention entry points, with q, k, v and dq, dk, dv as strided views
// of the projection z and its gradient dz (no copies).
#include "blockattn/layer.h"

#include <cstdint>

#include "core/status.h"
#include "layer/lt_matmul.h"

namespace blockattn {
namespace {

using core::invalid;
using layer::Matmul;

// cuBLASLt's scratch (its Hopper kernels want up to 32 MiB) after the
// attention's, 256-byte aligned.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;
constexpr size_t kAlign = 256;

size_t attention_part(int64_t num_seqs, int64_t total_tokens) {
  return (workspace_size(num_seqs, total_tokens) + kAlign - 1) / kAlign * kAlign;
}

Status check_pointer(const char* name, const void* p) {
  if (p == nullptr) return invalid("layer: ", name, " must not be null");
  if (reinterpret_cast<uintptr_t>(p) % kTensorAlignmentBytes != 0)
    return invalid("layer: ", name, " must be ", kTensorAlignmentBytes, "-byte aligned");
  return Status::Ok();
}

// What both directions check; the attention entry points check the rest
// (head dim, heads, offsets, rotary) on the views.
Status check_inputs(const LayerInputs& a, void* workspace, size_t workspace_bytes) {
  const LayerShape& s = a.shape;
  if (s.in_features <= 0) return invalid("layer: shape.in_features must be positive, got ", s.in_features);
  if (s.num_q_heads <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0)
    return invalid("layer: shape.num_q_heads, num_kv_heads and head_dim must be positive");
  if (s.total_tokens < 0 || s.total_tokens > INT32_MAX)
    return invalid("layer: shape.total_tokens must be in [0, 2^31), got ", s.total_tokens);
  if (s.total_tokens == 0) return Status::Ok();
  BLOCKATTN_RETURN_IF_ERROR(check_pointer("x", a.x));
  BLOCKATTN_RETURN_IF_ERROR(check_pointer("weight", a.weight));
  if (a.bias != nullptr) BLOCKATTN_RETURN_IF_ERROR(check_pointer("bias", a.bias));
  const size_t needed = layer_workspace_size(s.num_seqs, s.total_tokens);
  if (workspace == nullptr || workspace_bytes < needed)
    return invalid("layer: workspace must hold layer_workspace_size() = ", needed, " bytes; got ", workspace_bytes);
  return check_pointer("workspace", workspace);
}

// The [T, H, D] views of the q, k and v columns of a [T, N] projection (or
// of the dq, dk and dv columns of its gradient): token stride N, head stride D.
struct ColumnSlices {
  TensorView q, k, v;
};
ColumnSlices column_slices(const LayerShape& s, const void* z) {
  const int64_t width = s.projection_width();
  char* base = static_cast<char*>(const_cast<void*>(z));
  const int64_t head_bytes = int64_t{2} * s.head_dim;  // bf16 and fp16
  return {{base, width, s.head_dim},
          {base + s.num_q_heads * head_bytes, width, s.head_dim},
          {base + (s.num_q_heads + s.num_kv_heads) * head_bytes, width, s.head_dim}};
}

// The attention's arguments on views of the projection `z` [T, N].
template <typename Args>
Args attention_over(const LayerInputs& a, const void* z) {
  const LayerShape& s = a.shape;
  Args args;
  args.shape = {s.num_seqs, s.total_tokens, s.num_q_heads, s.num_kv_heads, s.head_dim, s.dtype, s.block_size};
  args.offsets = a.offsets;
  args.options = a.options;
  args.rotary = a.rotary;
  const ColumnSlices slices = column_slices(s, z);
  args.q = slices.q, args.k = slices.k, args.v = slices.v;
  return args;
}

void* gemm_workspace(const LayerShape& s, void* workspace) {
  return static_cast<char*>(workspace) + attention_part(s.num_seqs, s.total_tokens);
}

}  // namespace

size_t layer_workspace_size(int64_t num_seqs, int64_t total_tokens) {
  return attention_part(num_seqs, total_tokens) + kGemmWorkspaceBytes;
}

Status layer_forward(const LayerForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  BLOCKATTN_RETURN_IF_ERROR(check_inputs(a, workspace, workspace_bytes));
  const LayerShape& s = a.shape;
  ForwardArgs attention = attention_over<ForwardArgs>(a, a.z);
  attention.out = {a.out, int64_t{s.num_q_heads} * s.head_dim, s.head_dim};
  if (s.total_tokens == 0) return forward(attention, workspace, workspace_bytes, stream);
  BLOCKATTN_RETURN_IF_ERROR(check_pointer("z", a.z));
  BLOCKATTN_RETURN_IF_ERROR(check_pointer("out", a.out));
  // Validate the attention call before the GEMM writes z.
  Backend chosen;
  BLOCKATTN_RETURN_IF_ERROR(forward_backend(attention, &chosen));

  // z^T [N, T] = W [N, C] x^T [C, T] (+ b per row of z^T), column-major.
  Matmul projection;
  projection.m = s.projection_width();
  projection.n = s.total_tokens;
  projection.k = s.in_features;
  projection.transpose_a = true;
  projection.a = a.weight;
  projection.lda = s.in_features;
  projection.b = a.x;
  projection.ldb = s.in_features;
  projection.d = a.z;
  projection.ldd = s.projection_width();
  if (a.bias != nullptr) {
    projection.epilogue = Matmul::Epilogue::kBias;
    projection.vector = const_cast<void*>(a.bias);
  }
  BLOCKATTN_RETURN_IF_ERROR(
      layer::run_matmul(projection, s.dtype, gemm_workspace(s, workspace), kGemmWorkspaceBytes, stream));
  return forward(attention, workspace, workspace_bytes, stream);
}

Status layer_backward(const LayerBackwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  BLOCKATTN_RETURN_IF_ERROR(check_inputs(a, workspace, workspace_bytes));
  const LayerShape& s = a.shape;
  const int64_t width = s.projection_width();
  BackwardArgs attention = attention_over<BackwardArgs>(a, a.z);
  attention.dout = {const_cast<void*>(a.dout), int64_t{s.num_q_heads} * s.head_dim, s.head_dim};
  const ColumnSlices grads = column_slices(s, a.dz);
  attention.dq = grads.q, attention.dk = grads.k, attention.dv = grads.v;
  if ((a.bias == nullptr) != (a.dbias == nullptr))
    return invalid("layer: dbias must be given exactly when bias is (null bias: null dbias)");
  if (s.total_tokens == 0) return backward(attention, workspace, workspace_bytes, stream);
  for (const auto& [name, p] : {std::pair<const char*, const void*>{"z", a.z},
                                {"dout", a.dout},
                                {"dz", a.dz},
                                {"dx", a.dx},
                                {"dweight", a.dweight}})
    BLOCKATTN_RETURN_IF_ERROR(check_pointer(name, p));
  if (a.dbias != nullptr) BLOCKATTN_RETURN_IF_ERROR(check_pointer("dbias", a.dbias));
  Backend chosen;
  BLOCKATTN_RETURN_IF_ERROR(backward_backend(attention, &chosen));

  BLOCKATTN_RETURN_IF_ERROR(backward(attention, workspace, workspace_bytes, stream));
  void* gemm_scratch = gemm_workspace(s, workspace);

  // dx^T [C, T] = W^T [C, N] dz^T [N, T], column-major.
  Matmul input_grad;
  input_grad.m = s.in_features;
  input_grad.n = s.total_tokens;
  input_grad.k = width;
  input_grad.a = a.weight;
  input_grad.lda = s.in_features;
  input_grad.b = a.dz;
  input_grad.ldb = width;
  input_grad.d = a.dx;
  input_grad.ldd = s.in_features;
  BLOCKATTN_RETURN_IF_ERROR(layer::run_matmul(input_grad, s.dtype, gemm_scratch, kGemmWorkspaceBytes, stream));

  // dW^T [C, N] = x^T [C, T] dz [T, N]; db = the sum of dz over T (its k).
  Matmul weight_grad;
  weight_grad.m = s.in_features;
  weight_grad.n = width;
  weight_grad.k = s.total_tokens;
  weight_grad.a = a.x;
  weight_grad.lda = s.in_features;
  weight_grad.transpose_b = true;
  weight_grad.b = a.dz;
  weight_grad.ldb = width;
  weight_grad.d = a.dweight;
  weight_grad.ldd = s.in_features;
  if (a.dbias != nullptr) {
    weight_grad.epilogue = Matmul::Epilogue::kBiasGradB;
    weight_grad.vector = a.dbias;
  }
  return layer::run_matmul(weight_grad, s.dtype, gemm_scratch, kGemmWorkspaceBytes, stream);
}

}  // namespace blockattn
