#include "api/validate.h"
#include "api/validate_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/kernel_table.h"
#include "core/status.h"

namespace blockattn::api {
namespace {

using core::invalid;
using core::Problem;
using core::TensorRole;

Status check_shape(const Problem& p) {
  const Shape& s = p.shape;
  if (s.num_seqs < 0 || s.num_seqs >= std::numeric_limits<int32_t>::max())
    return invalid("num_seqs must be in [0, 2^31 - 1); got ", s.num_seqs);
  if (s.total_tokens < 0 || s.total_tokens > std::numeric_limits<int32_t>::max())
    return invalid("total_tokens must be in [0, 2^31 - 1] (offsets are int32); got ", s.total_tokens);
  BLOCKATTN_RETURN_IF_ERROR(check_heads(s.num_q_heads, s.num_kv_heads));
  if (!core::any_kernel_has_head_dim(s.head_dim))
    return invalid("head_dim must be one of the built head dims (", core::built_head_dims(), "); got ", s.head_dim);
  if (!core::any_kernel_has_block_size(s.block_size))
    return invalid("block_size must be one of the built block sizes (", core::built_block_sizes(), "); got ",
                   s.block_size);
  BLOCKATTN_RETURN_IF_ERROR(check_dtype(s.dtype));
  if (p.offsets == nullptr) return invalid("offsets must be a device pointer to num_seqs + 1 int32; got null");
  if (reinterpret_cast<uintptr_t>(p.offsets) % alignof(int32_t) != 0) return invalid("offsets must be 4-byte aligned");
  // Positive: the kernels take each row's max of the unscaled scores
  // (tile/softmax.cuh), which is the max of the scaled ones only then.
  if (!std::isfinite(p.softmax_scale) || p.softmax_scale < 0.f)
    return invalid("softmax_scale must be finite and positive (0 selects 1/sqrt(head_dim)); got ", p.softmax_scale);
  return check_backend(p.backend);
}

// Byte range [first, last) a [T, heads, D] view can touch.
std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& t, int64_t tokens, int heads, int dim) {
  const auto first = reinterpret_cast<uintptr_t>(t.data);
  const int64_t last_elem = (tokens - 1) * t.token_stride + (heads - 1) * t.head_stride + dim;
  return {first, first + static_cast<uintptr_t>(last_elem * kElementBytes)};
}

Status check_tensor(const char* name, const TensorView& t, int64_t tokens, int heads, int dim, bool output) {
  if (tokens == 0) return Status::Ok();  // never dereferenced
  if (t.data == nullptr) return invalid(name, ".data must not be null");
  if (!aligned(t.data)) return invalid(name, ".data must be ", kTensorAlignmentBytes, "-byte aligned");
  if (t.token_stride < 0 || t.token_stride % kAlignElems != 0)
    return invalid(name, ".token_stride must be a non-negative multiple of ", kAlignElems, " elements (",
                   kTensorAlignmentBytes, " bytes); got ", t.token_stride);
  if (t.head_stride < 0 || t.head_stride % kAlignElems != 0)
    return invalid(name, ".head_stride must be a non-negative multiple of ", kAlignElems, " elements (",
                   kTensorAlignmentBytes, " bytes); got ", t.head_stride);
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

size_t table_element_bytes(TableType t) { return t == TableType::kFloat32 ? 4 : 2; }

// Byte range a rotary table can be read in (empty when never read).
std::pair<uintptr_t, uintptr_t> table_span(const Rotary& r, const void* table, int64_t row_stride) {
  const auto first = reinterpret_cast<uintptr_t>(table);
  if (r.num_positions == 0) return {first, first};
  const int64_t elems = (r.num_positions - 1) * row_stride + r.rotary_dim / 2;
  return {first, first + static_cast<uintptr_t>(elems) * table_element_bytes(r.table_type)};
}

Status check_table(const Rotary& r, const char* name, const void* table, int64_t row_stride) {
  if (r.num_positions == 0) return Status::Ok();  // never read
  if (table == nullptr) return invalid("rotary.", name, " must not be null when rotary.num_positions > 0");
  if (reinterpret_cast<uintptr_t>(table) % table_element_bytes(r.table_type) != 0)
    return invalid("rotary.", name, " must be aligned to its element size (", table_element_bytes(r.table_type),
                   " bytes)");
  if (row_stride < 0) return invalid("rotary.", name, "_row_stride must be >= 0; got ", row_stride);
  if (row_stride > (std::numeric_limits<int64_t>::max() / 8) / std::max<int64_t>(r.num_positions, 1))
    return invalid("rotary.", name, "_row_stride x num_positions overflows; got ", row_stride);
  return Status::Ok();
}

Status check_rotary(const Problem& p) {
  const Rotary& r = p.rotary;
  if (!r.enabled()) return Status::Ok();
  const int D = p.shape.head_dim;
  if (r.rotary_dim < 0 || r.rotary_dim % 2 != 0 || r.rotary_dim > D)
    return invalid("rotary.rotary_dim must be 0 (off) or even and <= head_dim (", D, "); got ", r.rotary_dim);
  if (r.pairs != RotaryPairs::kInterleaved && r.pairs != RotaryPairs::kHalfSplit)
    return invalid("rotary.pairs must be kInterleaved or kHalfSplit; got ", static_cast<int>(r.pairs));
  if (r.pairs == RotaryPairs::kHalfSplit && r.rotary_dim % 16 != 0)
    return invalid("rotary.rotary_dim must be a multiple of 16 with kHalfSplit pairs; got ", r.rotary_dim);
  if (r.positions != RotaryPositions::kTokenRow && r.positions != RotaryPositions::kInSequence)
    return invalid("rotary.positions must be kTokenRow or kInSequence; got ", static_cast<int>(r.positions));
  if (r.table_type != TableType::kFloat32 && r.table_type != TableType::kBF16 && r.table_type != TableType::kFP16)
    return invalid("rotary.table_type must be kFloat32, kBF16 or kFP16; got ", static_cast<int>(r.table_type));
  if (r.num_positions < 0) return invalid("rotary.num_positions must be >= 0; got ", r.num_positions);
  BLOCKATTN_RETURN_IF_ERROR(check_table(r, "cos", r.cos, r.cos_row_stride));
  BLOCKATTN_RETURN_IF_ERROR(check_table(r, "sin", r.sin, r.sin_row_stride));
  if (r.seq_start != nullptr) {
    if (r.positions != RotaryPositions::kInSequence)
      return invalid("rotary.seq_start is only read with kInSequence positions; leave it null for kTokenRow");
    if (reinterpret_cast<uintptr_t>(r.seq_start) % alignof(int32_t) != 0)
      return invalid("rotary.seq_start must be 4-byte aligned");
  }
  return Status::Ok();
}

// Outputs may interleave with each other (packed dq/dk/dv) but must not share
// bytes with any input (the rotary tables included).
Status check_no_overlap(const Problem& p) {
  const Shape& s = p.shape;
  if (s.total_tokens == 0) return Status::Ok();
  for (const TensorRole& out : core::tensor_roles(p.operation)) {
    if (!out.output) continue;
    const auto o = byte_span(p.tensor(out.id), s.total_tokens, core::heads_of(s, out), s.head_dim);
    auto overlaps = [&](std::pair<uintptr_t, uintptr_t> i) { return o.first < i.second && i.first < o.second; };
    for (const TensorRole& in : core::tensor_roles(p.operation)) {
      if (in.output) continue;
      if (overlaps(byte_span(p.tensor(in.id), s.total_tokens, core::heads_of(s, in), s.head_dim)))
        return invalid(out.name, " must not overlap input ", in.name);
    }
    const Rotary& r = p.rotary;
    if (!r.enabled()) continue;
    if (overlaps(table_span(r, r.cos, r.cos_row_stride))) return invalid(out.name, " must not overlap rotary.cos");
    if (overlaps(table_span(r, r.sin, r.sin_row_stride))) return invalid(out.name, " must not overlap rotary.sin");
    const auto start = reinterpret_cast<uintptr_t>(r.seq_start);
    if (r.seq_start != nullptr && overlaps({start, start + sizeof(int32_t) * static_cast<size_t>(s.num_seqs)}))
      return invalid(out.name, " must not overlap rotary.seq_start");
  }
  return Status::Ok();
}

}  // namespace

// Shape and options, the rotary description, then every input and output
// view, then the overlap rule.
Status validate_problem(const Problem& p) {
  BLOCKATTN_RETURN_IF_ERROR(check_shape(p));
  BLOCKATTN_RETURN_IF_ERROR(check_rotary(p));
  for (bool outputs : {false, true})  // inputs first: their messages come first
    for (const TensorRole& r : core::tensor_roles(p.operation))
      if (r.output == outputs)
        BLOCKATTN_RETURN_IF_ERROR(check_tensor(r.name, p.tensor(r.id), p.shape.total_tokens, core::heads_of(p.shape, r),
                                               p.shape.head_dim, r.output));
  return check_no_overlap(p);
}

Status validate_workspace(const Problem& p, const void* workspace, size_t bytes) {
  const size_t needed = workspace_size(p.shape.num_seqs, p.shape.total_tokens);
  if (workspace == nullptr) return invalid("workspace must not be null (workspace_size() = ", needed, " bytes)");
  if (!aligned(workspace)) return invalid("workspace must be ", kTensorAlignmentBytes, "-byte aligned");
  if (bytes < needed) return invalid("workspace_bytes must be >= workspace_size() = ", needed, "; got ", bytes);
  return Status::Ok();
}

}  // namespace blockattn::api
