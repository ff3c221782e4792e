// extern "C" wrappers over the C++ API, with the error message kept per thread.
#include "blockattn/blockattn_c.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "blockattn/blockattn.h"
#include "blockattn/dense.h"

namespace {

static_assert(BLOCKATTN_ROTARY_HALF_SPLIT == static_cast<int>(blockattn::RotaryPairs::kHalfSplit) &&
                  BLOCKATTN_ROTARY_INTERLEAVED == static_cast<int>(blockattn::RotaryPairs::kInterleaved),
              "C and C++ rotary pair enums agree");
static_assert(BLOCKATTN_ROTARY_IN_SEQUENCE == static_cast<int>(blockattn::RotaryPositions::kInSequence) &&
                  BLOCKATTN_ROTARY_TOKEN_ROW == static_cast<int>(blockattn::RotaryPositions::kTokenRow),
              "C and C++ rotary position enums agree");
static_assert(BLOCKATTN_TABLE_FLOAT32 == static_cast<int>(blockattn::TableType::kFloat32) &&
                  BLOCKATTN_TABLE_BF16 == static_cast<int>(blockattn::TableType::kBF16) &&
                  BLOCKATTN_TABLE_FP16 == static_cast<int>(blockattn::TableType::kFP16),
              "C and C++ table type enums agree");

// The calling thread's last message. A plain array: no allocation and no
// thread-exit destructor in a library that bindings load with dlopen.
constexpr size_t kMessageBytes = 1024;
thread_local char g_last_error[kMessageBytes];

void set_last_error(const std::string& message) { std::snprintf(g_last_error, kMessageBytes, "%s", message.c_str()); }

blockattn_status finish(const blockattn::Status& s) {
  set_last_error(s.message);
  return static_cast<blockattn_status>(s.code);
}

blockattn_status fail(const char* message) {
  set_last_error(message);
  return BLOCKATTN_INVALID_ARGUMENT;
}

// The smallest struct_size a caller may pass: version 2's fields up to stream
// (reuse_schedule, appended after it, defaults to 0 for callers without it).
constexpr size_t kMinArgsSize = offsetof(blockattn_args, stream) + sizeof(void*);

// The dense forward's struct: every field through `stream` exists since
// version 4, the first to have them.
constexpr size_t kMinDenseArgsSize = offsetof(blockattn_dense_args, stream) + sizeof(void*);

// Reads a caller's versioned struct (the first struct_size bytes of it; later
// fields keep their zero defaults). Returns null, or the message when unusable.
template <typename Args>
const char* read_versioned(const Args* args, Args* local, size_t min_size, const char* too_small) {
  if (args == nullptr) return "blockattn: args must not be null";
  if (args->struct_size < min_size) return too_small;
  *local = Args{};
  std::memcpy(static_cast<void*>(local), args, std::min(args->struct_size, sizeof(Args)));
  return nullptr;
}

const char* read_args(const blockattn_args* args, blockattn_args* local) {
  return read_versioned(args, local, kMinArgsSize,
                        "blockattn: args->struct_size is smaller than any version of blockattn_args (initialize with "
                        "BLOCKATTN_ARGS_INIT)");
}

const char* read_args(const blockattn_dense_args* args, blockattn_dense_args* local) {
  return read_versioned(args, local, kMinDenseArgsSize,
                        "blockattn: args->struct_size is smaller than any version of blockattn_dense_args (initialize "
                        "with BLOCKATTN_DENSE_ARGS_INIT)");
}

blockattn::TensorView view(const blockattn_tensor& t) { return {t.data, t.token_stride, t.head_stride}; }

void fill_inputs(const blockattn_args& a, blockattn::AttentionInputs* in) {
  in->shape = {a.num_seqs,
               a.total_tokens,
               a.num_q_heads,
               a.num_kv_heads,
               a.head_dim,
               static_cast<blockattn::DType>(a.dtype),
               a.block_size != 0 ? a.block_size : blockattn::kDefaultBlockSize};
  in->offsets = a.offsets;
  in->q = view(a.q);
  in->k = view(a.k);
  in->v = view(a.v);
  in->options = {a.softmax_scale, static_cast<blockattn::Backend>(a.backend), a.reuse_schedule != 0};
  blockattn::Rotary& r = in->rotary;
  r.rotary_dim = a.rotary_dim;
  r.pairs = static_cast<blockattn::RotaryPairs>(a.rotary_pairs);
  r.positions = static_cast<blockattn::RotaryPositions>(a.rotary_positions);
  r.rotate_v = a.rotary_rotate_v != 0;
  r.cos = a.rotary_cos;
  r.sin = a.rotary_sin;
  r.cos_row_stride = a.rotary_cos_row_stride;
  r.sin_row_stride = a.rotary_sin_row_stride;
  r.num_positions = a.rotary_num_positions;
  r.table_type = static_cast<blockattn::TableType>(a.rotary_table_type);
  r.seq_start = a.rotary_seq_start;
}

blockattn::ForwardArgs forward_args(const blockattn_args& a) {
  blockattn::ForwardArgs f;
  fill_inputs(a, &f);
  f.out = view(a.out);
  return f;
}

blockattn::BackwardArgs backward_args(const blockattn_args& a) {
  blockattn::BackwardArgs b;
  fill_inputs(a, &b);
  b.dout = view(a.dout);
  b.dq = view(a.dq);
  b.dk = view(a.dk);
  b.dv = view(a.dv);
  return b;
}

// The backend the C++ query `query` picks for the call `to_cpp(args)` describes.
template <typename Args, typename ToCpp, typename Query>
blockattn_status query_backend(const Args* args, int32_t* chosen, ToCpp to_cpp, Query query) {
  Args a;
  if (const char* error = read_args(args, &a)) return fail(error);
  if (chosen == nullptr) return fail("blockattn: chosen must not be null");
  blockattn::Backend b = blockattn::Backend::kAuto;
  const blockattn::Status s = query(to_cpp(a), &b);
  if (s.ok()) *chosen = static_cast<int32_t>(b);
  return finish(s);
}

blockattn::DenseTensorView dense_view(const blockattn_dense_tensor& t) {
  return {t.data, t.batch_stride, t.head_stride, t.seq_stride};
}

blockattn::DenseForwardArgs dense_args(const blockattn_dense_args& a) {
  blockattn::DenseForwardArgs d;
  d.shape = {a.batch, a.seq_len, a.num_q_heads, a.num_kv_heads, a.head_dim, static_cast<blockattn::DType>(a.dtype)};
  d.q = dense_view(a.q);
  d.k = dense_view(a.k);
  d.v = dense_view(a.v);
  d.out = dense_view(a.out);
  d.lse = a.lse;
  d.causal = a.causal != 0;
  d.softmax_scale = a.softmax_scale;
  d.backend = static_cast<blockattn::Backend>(a.backend);
  return d;
}

// Row `index` of a kernel table, converted to its C struct; the message names
// the table's count function when the index is past the end.
template <typename Row, typename CRow, typename Convert>
blockattn_status table_row(const Row* rows, size_t n, size_t index, CRow* out, const char* past_end, Convert convert) {
  if (out == nullptr) return fail("blockattn: config must not be null");
  if (index >= n) return fail(past_end);
  *out = convert(rows[index]);
  set_last_error("");
  return BLOCKATTN_OK;
}

}  // namespace

extern "C" int blockattn_abi_version(void) { return BLOCKATTN_C_ABI_VERSION; }

extern "C" const char* blockattn_last_error(void) { return g_last_error; }

extern "C" const char* blockattn_version(void) { return blockattn::version(); }

extern "C" size_t blockattn_workspace_size(int64_t num_seqs, int64_t total_tokens) {
  return blockattn::workspace_size(num_seqs, total_tokens);
}

extern "C" int32_t blockattn_tensor_alignment_bytes(void) { return blockattn::kTensorAlignmentBytes; }

extern "C" int32_t blockattn_default_block_size(void) { return blockattn::kDefaultBlockSize; }

extern "C" size_t blockattn_config_count(void) {
  size_t n = 0;
  blockattn::supported_configs(&n);
  return n;
}

extern "C" blockattn_status blockattn_config_at(size_t index, blockattn_config* config) {
  size_t n = 0;
  const blockattn::KernelConfig* rows = blockattn::supported_configs(&n);
  return table_row(rows, n, index, config, "blockattn: index must be < blockattn_config_count()",
                   [](const blockattn::KernelConfig& c) {
                     return blockattn_config{static_cast<int32_t>(c.backend),
                                             static_cast<int32_t>(c.operation),
                                             static_cast<int32_t>(c.dtype),
                                             c.head_dim,
                                             c.block_size,
                                             c.automatic ? 1 : 0};
                   });
}

extern "C" int32_t blockattn_config_rotary(size_t index) {
  size_t n = 0;
  const blockattn::KernelConfig* rows = blockattn::supported_configs(&n);
  return index < n ? (rows[index].rotary ? 1 : 0) : -1;
}

extern "C" blockattn_status blockattn_forward(const blockattn_args* args) {
  blockattn_args a;
  if (const char* error = read_args(args, &a)) return fail(error);
  return finish(
      blockattn::forward(forward_args(a), a.workspace, a.workspace_bytes, static_cast<cudaStream_t>(a.stream)));
}

extern "C" blockattn_status blockattn_backward(const blockattn_args* args) {
  blockattn_args a;
  if (const char* error = read_args(args, &a)) return fail(error);
  return finish(
      blockattn::backward(backward_args(a), a.workspace, a.workspace_bytes, static_cast<cudaStream_t>(a.stream)));
}

extern "C" blockattn_status blockattn_forward_backend(const blockattn_args* args, int32_t* chosen) {
  return query_backend(args, chosen, forward_args, blockattn::forward_backend);
}

extern "C" blockattn_status blockattn_backward_backend(const blockattn_args* args, int32_t* chosen) {
  return query_backend(args, chosen, backward_args, blockattn::backward_backend);
}

extern "C" size_t blockattn_dense_config_count(void) {
  size_t n = 0;
  blockattn::dense_configs(&n);
  return n;
}

extern "C" blockattn_status blockattn_dense_config_at(size_t index, blockattn_dense_config* config) {
  size_t n = 0;
  const blockattn::DenseKernelConfig* rows = blockattn::dense_configs(&n);
  return table_row(rows, n, index, config, "blockattn: index must be < blockattn_dense_config_count()",
                   [](const blockattn::DenseKernelConfig& c) {
                     return blockattn_dense_config{static_cast<int32_t>(c.backend), static_cast<int32_t>(c.dtype),
                                                   c.head_dim, c.automatic ? 1 : 0};
                   });
}

extern "C" blockattn_status blockattn_dense_forward(const blockattn_dense_args* args) {
  blockattn_dense_args a;
  if (const char* error = read_args(args, &a)) return fail(error);
  return finish(blockattn::dense_forward(dense_args(a), static_cast<cudaStream_t>(a.stream)));
}

extern "C" blockattn_status blockattn_dense_forward_backend(const blockattn_dense_args* args, int32_t* chosen) {
  return query_backend(args, chosen, dense_args, blockattn::dense_forward_backend);
}
