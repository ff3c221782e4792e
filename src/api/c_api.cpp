// extern "C" wrappers over the C++ API, with the error message kept per thread.
#include "blockattn/blockattn_c.h"

#include <cstdio>
#include <string>

#include "blockattn/blockattn.h"

namespace {

// The calling thread's last message. A plain array: no allocation and no
// thread-exit destructor in a library that bindings load with dlopen.
constexpr size_t kMessageBytes = 1024;
thread_local char g_last_error[kMessageBytes];

void set_last_error(const std::string& message) { std::snprintf(g_last_error, kMessageBytes, "%s", message.c_str()); }

blockattn::TensorView view(const blockattn_tensor& t) { return {t.data, t.token_stride, t.head_stride}; }

blockattn::Shape shape(const blockattn_problem& p) {
  return {p.num_seqs,     p.total_tokens, p.num_q_heads,
          p.num_kv_heads, p.head_dim,     static_cast<blockattn::DType>(p.dtype)};
}

blockattn::Options options(const blockattn_problem& p) {
  return {p.softmax_scale, static_cast<blockattn::Backend>(p.backend)};
}

blockattn_status finish(const blockattn::Status& s) {
  set_last_error(s.message);
  return static_cast<blockattn_status>(s.code);
}

blockattn_status null_problem() {
  set_last_error("blockattn: problem must not be null");
  return BLOCKATTN_INVALID_ARGUMENT;
}

}  // namespace

extern "C" int blockattn_abi_version(void) { return BLOCKATTN_C_ABI_VERSION; }

extern "C" const char* blockattn_last_error(void) { return g_last_error; }

extern "C" size_t blockattn_workspace_size(int64_t num_seqs, int64_t total_tokens) {
  return blockattn::workspace_size(num_seqs, total_tokens);
}

extern "C" blockattn_status blockattn_forward(const blockattn_problem* problem, const int32_t* offsets,
                                              blockattn_tensor q, blockattn_tensor k, blockattn_tensor v,
                                              blockattn_tensor out, void* workspace, size_t workspace_bytes,
                                              void* stream) {
  if (problem == nullptr) return null_problem();
  blockattn::ForwardArgs args;
  args.shape = shape(*problem);
  args.offsets = offsets;
  args.q = view(q);
  args.k = view(k);
  args.v = view(v);
  args.out = view(out);
  args.options = options(*problem);
  return finish(blockattn::forward(args, workspace, workspace_bytes, static_cast<cudaStream_t>(stream)));
}

extern "C" blockattn_status blockattn_backward(const blockattn_problem* problem, const int32_t* offsets,
                                               blockattn_tensor q, blockattn_tensor k, blockattn_tensor v,
                                               blockattn_tensor dout, blockattn_tensor dq, blockattn_tensor dk,
                                               blockattn_tensor dv, void* workspace, size_t workspace_bytes,
                                               void* stream) {
  if (problem == nullptr) return null_problem();
  blockattn::BackwardArgs args;
  args.shape = shape(*problem);
  args.offsets = offsets;
  args.q = view(q);
  args.k = view(k);
  args.v = view(v);
  args.dout = view(dout);
  args.dq = view(dq);
  args.dk = view(dk);
  args.dv = view(dv);
  args.options = options(*problem);
  return finish(blockattn::backward(args, workspace, workspace_bytes, static_cast<cudaStream_t>(stream)));
}
