#include "api/validate_dense.h"
#include "api/validate_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/status.h"

namespace blockattn::api {
namespace {

using core::DenseProblem;
using core::invalid;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

Status check_shape(const DenseProblem& p) {
  const DenseShape& s = p.shape;
  if (s.batch < 0 || s.batch > kInt32Max) return invalid("batch must be in [0, 2^31 - 1]; got ", s.batch);
  // Rows are int32 on the device, with room for a unit and a key tile past the end.
  if (s.seq_len < 0 || s.seq_len > (int64_t{1} << 30)) return invalid("seq_len must be in [0, 2^30]; got ", s.seq_len);
  BLOCKATTN_RETURN_IF_ERROR(check_heads(s.num_q_heads, s.num_kv_heads));
  if (!core::any_dense_kernel_has_head_dim(s.head_dim))
    return invalid("head_dim must be one of the built dense head dims (", core::built_dense_head_dims(), "); got ",
                   s.head_dim);
  BLOCKATTN_RETURN_IF_ERROR(check_dtype(s.dtype));
  // Work units (query blocks of at least 64 rows) are counted in int32 on the
  // device, with room for a grid stride past the last one.
  constexpr int64_t kMaxUnits = int64_t{1} << 30;
  if (s.batch * s.num_q_heads > kMaxUnits || s.batch * s.num_q_heads * ((s.seq_len + 63) / 64) > kMaxUnits)
    return invalid("batch x num_q_heads x ceil(seq_len / 64) must be <= 2^30; got batch=", s.batch,
                   ", num_q_heads=", s.num_q_heads, ", seq_len=", s.seq_len);
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.f)
    return invalid("softmax_scale must be finite and positive (0 selects 1/sqrt(head_dim)); got ", p.softmax_scale);
  return check_backend(p.backend);
}

// (stride, extent) of a view's batch, head and row dims.
struct Dim {
  int64_t stride, extent;
};

// Byte range [first, last) a view can touch; 128-bit arithmetic, so no stride
// can wrap it around.
std::pair<unsigned __int128, unsigned __int128> byte_span(const void* data, const Dim (&dims)[3], int64_t row_bytes) {
  const auto first = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(data));
  unsigned __int128 last = first + static_cast<unsigned __int128>(row_bytes);
  for (const Dim& d : dims)
    last += static_cast<unsigned __int128>(d.extent - 1) * static_cast<unsigned __int128>(d.stride) * kElementBytes;
  return {first, last};
}

Status check_tensor(const char* name, const DenseTensorView& t, const Dim (&dims)[3], int dim, bool output) {
  if (t.data == nullptr) return invalid(name, ".data must not be null");
  if (!aligned(t.data)) return invalid(name, ".data must be ", kTensorAlignmentBytes, "-byte aligned");
  const char* stride_names[3] = {"batch_stride", "head_stride", "seq_stride"};
  for (int i = 0; i < 3; ++i)
    if (dims[i].stride < 0 || dims[i].stride % kAlignElems != 0)
      return invalid(name, ".", stride_names[i], " must be a non-negative multiple of ", kAlignElems, " elements (",
                     kTensorAlignmentBytes, " bytes); got ", dims[i].stride);
  const auto span = byte_span(t.data, dims, dim * kElementBytes);
  if (span.second > static_cast<unsigned __int128>(std::numeric_limits<uintptr_t>::max()))
    return invalid(name, " strides reach past the address space");
  if (!output) return Status::Ok();
  // Distinct rows must not overlap: ordered by stride, the dims with more than
  // one index must each clear the whole extent of the ones inside them.
  Dim sorted[3];
  int n = 0;
  for (const Dim& d : dims)
    if (d.extent > 1) sorted[n++] = d;
  std::sort(sorted, sorted + n, [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t inner = dim;  // elements the dims so far span
  for (int i = 0; i < n; ++i) {
    if (sorted[i].stride < inner)
      return invalid(name, " rows overlap: batch_stride=", t.batch_stride, ", head_stride=", t.head_stride,
                     ", seq_stride=", t.seq_stride, " interleave rows of ", dim, " elements");
    inner = sorted[i].stride * sorted[i].extent;
  }
  return Status::Ok();
}

void dims_of(const DenseTensorView& t, const DenseShape& s, int heads, Dim (&dims)[3]) {
  dims[0] = {t.batch_stride, s.batch};
  dims[1] = {t.head_stride, heads};
  dims[2] = {t.seq_stride, s.seq_len};
}

bool overlaps(std::pair<unsigned __int128, unsigned __int128> a, std::pair<unsigned __int128, unsigned __int128> b) {
  return a.first < b.second && b.first < a.second;
}

}  // namespace

Status validate_dense_problem(const DenseProblem& p) {
  BLOCKATTN_RETURN_IF_ERROR(check_shape(p));
  if (p.empty()) return Status::Ok();  // nothing is dereferenced
  const DenseShape& s = p.shape;
  struct Named {
    const char* name;
    const DenseTensorView* view;
    int heads;
    bool output;
  };
  const Named tensors[4] = {{"q", &p.q, s.num_q_heads, false},
                            {"k", &p.k, s.num_kv_heads, false},
                            {"v", &p.v, s.num_kv_heads, false},
                            {"out", &p.out, s.num_q_heads, true}};
  std::pair<unsigned __int128, unsigned __int128> spans[4];
  for (int i = 0; i < 4; ++i) {
    Dim dims[3];
    dims_of(*tensors[i].view, s, tensors[i].heads, dims);
    BLOCKATTN_RETURN_IF_ERROR(check_tensor(tensors[i].name, *tensors[i].view, dims, s.head_dim, tensors[i].output));
    spans[i] = byte_span(tensors[i].view->data, dims, s.head_dim * kElementBytes);
  }
  for (int i = 0; i < 3; ++i)
    if (overlaps(spans[3], spans[i])) return invalid("out must not overlap input ", tensors[i].name);
  if (p.lse != nullptr) {
    if (reinterpret_cast<uintptr_t>(p.lse) % alignof(float) != 0) return invalid("lse must be 4-byte aligned");
    const auto first = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(p.lse));
    const std::pair<unsigned __int128, unsigned __int128> lse_span = {
        first, first + static_cast<unsigned __int128>(s.batch * s.num_q_heads) * s.seq_len * sizeof(float)};
    for (int i = 0; i < 4; ++i)
      if (overlaps(lse_span, spans[i])) return invalid("lse must not overlap ", tensors[i].name);
  }
  return Status::Ok();
}

}  // namespace blockattn::api
