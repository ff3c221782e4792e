#include "api/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "schedule/block_schedule.h"

namespace blockattn {
namespace {

constexpr int64_t kAlignElems = 8;  // 16 bytes of 16-bit elements

// Message pieces. No iostreams: a host process (e.g. Python) may have changed
// the global C++ locale, and formatting must not depend on it.
std::string piece(const char* s) { return s; }
std::string piece(float x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}
template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
std::string piece(Int x) {
  return std::to_string(x);
}

template <typename... Parts>
Status invalid(const Parts&... parts) {
  return {StatusCode::kInvalidArgument, (std::string("blockattn: ") + ... + piece(parts))};
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status check_shape(const Shape& s, const int32_t* offsets, const Options& o) {
  if (s.num_seqs < 0 || s.num_seqs >= std::numeric_limits<int32_t>::max())
    return invalid("num_seqs must be in [0, 2^31 - 1); got ", s.num_seqs);
  if (s.total_tokens < 0 || s.total_tokens > std::numeric_limits<int32_t>::max())
    return invalid("total_tokens must be in [0, 2^31 - 1] (offsets are int32); got ", s.total_tokens);
  if (s.num_q_heads < 1) return invalid("num_q_heads must be >= 1; got ", s.num_q_heads);
  if (s.num_kv_heads < 1) return invalid("num_kv_heads must be >= 1; got ", s.num_kv_heads);
  if (s.num_q_heads % s.num_kv_heads != 0)
    return invalid("num_q_heads must be a multiple of num_kv_heads; got num_q_heads=", s.num_q_heads,
                   ", num_kv_heads=", s.num_kv_heads);
  if (s.head_dim != 64 && s.head_dim != 128) return invalid("head_dim must be 64 or 128; got ", s.head_dim);
  if (s.dtype != DType::kBF16 && s.dtype != DType::kFP16)
    return invalid("dtype must be kBF16 or kFP16; got ", static_cast<int>(s.dtype));
  if (offsets == nullptr) return invalid("offsets must be a device pointer to num_seqs + 1 int32; got null");
  if (reinterpret_cast<uintptr_t>(offsets) % alignof(int32_t) != 0) return invalid("offsets must be 4-byte aligned");
  if (!std::isfinite(o.softmax_scale))
    return invalid("softmax_scale must be finite (0 selects 1/sqrt(head_dim)); got ", o.softmax_scale);
  if (o.backend != Backend::kAuto && o.backend != Backend::kPortable && o.backend != Backend::kHopper)
    return invalid("backend must be kAuto, kPortable or kHopper; got ", static_cast<int>(o.backend));
  return Status::Ok();
}

// Byte range [first, last) a [T, heads, D] view can touch.
std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& t, int64_t tokens, int heads, int dim) {
  const auto first = reinterpret_cast<uintptr_t>(t.data);
  const int64_t last_elem = (tokens - 1) * t.token_stride + (heads - 1) * t.head_stride + dim;
  return {first, first + static_cast<uintptr_t>(last_elem) * 2};
}

Status check_tensor(const char* name, const TensorView& t, int64_t tokens, int heads, int dim, bool output) {
  if (tokens == 0) return Status::Ok();  // never dereferenced
  if (t.data == nullptr) return invalid(name, ".data must not be null");
  if (!aligned16(t.data)) return invalid(name, ".data must be 16-byte aligned");
  if (t.token_stride < 0 || t.token_stride % kAlignElems != 0)
    return invalid(name, ".token_stride must be a non-negative multiple of 8 elements (16 bytes); got ",
                   t.token_stride);
  if (t.head_stride < 0 || t.head_stride % kAlignElems != 0)
    return invalid(name, ".head_stride must be a non-negative multiple of 8 elements (16 bytes); got ", t.head_stride);
  if (!output) return Status::Ok();
  // Outputs: distinct (token, head) rows must not overlap. Order the dims with
  // more than one index by stride; the inner one must clear a row of `dim`
  // elements, the outer one the whole inner extent.
  std::pair<int64_t, int64_t> dims[2];  // (stride, extent)
  int n = 0;
  if (tokens > 1) dims[n++] = {t.token_stride, tokens};
  if (heads > 1) dims[n++] = {t.head_stride, heads};
  if (n == 2 && dims[0].first > dims[1].first) std::swap(dims[0], dims[1]);
  if (n >= 1 && dims[0].first < dim)
    return invalid(name, " rows overlap: the smaller of token_stride and head_stride must be >= head_dim (", dim,
                   "); got token_stride=", t.token_stride, ", head_stride=", t.head_stride);
  if (n == 2 && dims[1].first < dims[0].first * dims[0].second)
    return invalid(name, " rows overlap: token_stride=", t.token_stride, ", head_stride=", t.head_stride,
                   " interleave tokens and heads");
  return Status::Ok();
}

struct NamedView {
  const char* name;
  const TensorView* view;
  int heads;
};

// Outputs may interleave with each other (packed dq/dk/dv) but must not share
// bytes with any input.
Status check_no_overlap(const Shape& s, const NamedView* outs, int n_out, const NamedView* ins, int n_in) {
  if (s.total_tokens == 0) return Status::Ok();
  for (int i = 0; i < n_out; ++i) {
    const auto o = byte_span(*outs[i].view, s.total_tokens, outs[i].heads, s.head_dim);
    for (int j = 0; j < n_in; ++j) {
      const auto in = byte_span(*ins[j].view, s.total_tokens, ins[j].heads, s.head_dim);
      if (o.first < in.second && in.first < o.second)
        return invalid(outs[i].name, " must not overlap input ", ins[j].name);
    }
  }
  return Status::Ok();
}

Status check_workspace(const Shape& s, const void* workspace, size_t bytes) {
  const size_t needed = workspace_size(s.num_seqs, s.total_tokens);
  if (workspace == nullptr) return invalid("workspace must not be null (workspace_size() = ", needed, " bytes)");
  if (!aligned16(workspace)) return invalid("workspace must be 16-byte aligned");
  if (bytes < needed) return invalid("workspace_bytes must be >= workspace_size() = ", needed, "; got ", bytes);
  return Status::Ok();
}

#define BLOCKATTN_RETURN_IF_ERROR(expr) \
  do {                                  \
    Status status_ = (expr);            \
    if (!status_.ok()) return status_;  \
  } while (0)

// Shape and options, then every input and output view, then the overlap rule.
template <size_t kIns, size_t kOuts>
Status check_views(const Shape& s, const int32_t* offsets, const Options& options, const NamedView (&ins)[kIns],
                   const NamedView (&outs)[kOuts]) {
  BLOCKATTN_RETURN_IF_ERROR(check_shape(s, offsets, options));
  for (const NamedView& t : ins)
    BLOCKATTN_RETURN_IF_ERROR(check_tensor(t.name, *t.view, s.total_tokens, t.heads, s.head_dim, false));
  for (const NamedView& t : outs)
    BLOCKATTN_RETURN_IF_ERROR(check_tensor(t.name, *t.view, s.total_tokens, t.heads, s.head_dim, true));
  return check_no_overlap(s, outs, static_cast<int>(kOuts), ins, static_cast<int>(kIns));
}

}  // namespace

Status validate_forward_tensors(const ForwardArgs& a) {
  const Shape& s = a.shape;
  const NamedView ins[] = {{"q", &a.q, s.num_q_heads}, {"k", &a.k, s.num_kv_heads}, {"v", &a.v, s.num_kv_heads}};
  const NamedView outs[] = {{"out", &a.out, s.num_q_heads}};
  return check_views(s, a.offsets, a.options, ins, outs);
}

Status validate_forward(const ForwardArgs& a, const void* workspace, size_t workspace_bytes) {
  BLOCKATTN_RETURN_IF_ERROR(validate_forward_tensors(a));
  return check_workspace(a.shape, workspace, workspace_bytes);
}

Status validate_backward_tensors(const BackwardArgs& a) {
  const Shape& s = a.shape;
  const NamedView ins[] = {{"q", &a.q, s.num_q_heads},
                           {"k", &a.k, s.num_kv_heads},
                           {"v", &a.v, s.num_kv_heads},
                           {"dout", &a.dout, s.num_q_heads}};
  const NamedView outs[] = {{"dq", &a.dq, s.num_q_heads}, {"dk", &a.dk, s.num_kv_heads}, {"dv", &a.dv, s.num_kv_heads}};
  return check_views(s, a.offsets, a.options, ins, outs);
}

Status validate_backward(const BackwardArgs& a, const void* workspace, size_t workspace_bytes) {
  BLOCKATTN_RETURN_IF_ERROR(validate_backward_tensors(a));
  return check_workspace(a.shape, workspace, workspace_bytes);
}

}  // namespace blockattn
