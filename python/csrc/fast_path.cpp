// blockattn._ext: the eager fast path of blockattn.block_attention.
//
// The package's portable route (ops.py over the C ABI through ctypes) costs
// about 20 us of Python per call before the library is reached: argument
// checks, packing the argument struct, allocations through Python. For the
// small batches of a serving or ranking step that is most of the call
// (docs/perf.md, "Host overhead, step 2"). This module does the same work in C++ for
// the common call: autograd through a C++ torch::autograd::Function (the
// backward runs on the autograd thread without entering Python), allocations
// through ATen, the stream and device from c10.
//
// It accepts a call only when every condition below holds and otherwise
// returns None, so that ops.py runs its own route: the one that raises the
// documented TypeError/ValueError messages and handles what this path does not
// (rotary, views the kernels cannot read in place, empty batches). Errors the
// library reports after the checks are raised as ops.py raises them.
//
// Built only where PyTorch's headers are present (cmake/TorchExtension.cmake)
// and loaded only by the torch version it was built against
// (python/blockattn/_fast.py); the C++ library never depends on it.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/extension.h>

#include "blockattn/blockattn.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---------------------------------------------------------------------------
// The kernel table: which (operation, dtype, head dim, block size) have a
// kernel without rotary (the library's table is static storage).
// ---------------------------------------------------------------------------

bool has_plain_kernel(blockattn::Operation op, blockattn::DType dtype, int64_t head_dim, int64_t block_size) {
  size_t count = 0;
  const blockattn::KernelConfig* rows = blockattn::supported_configs(&count);
  for (size_t i = 0; i < count; ++i) {
    const blockattn::KernelConfig& c = rows[i];
    if (!c.rotary && c.operation == op && c.dtype == dtype && c.head_dim == head_dim && c.block_size == block_size)
      return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Tensors as the library reads them
// ---------------------------------------------------------------------------

// The library reads a [T, H, D] view in place when its last dim is contiguous
// and its data pointer and token/head strides are multiples of 16 bytes
// (ops.py: _kernel_operand).
bool readable_in_place(const at::Tensor& t) {
  const int64_t multiple = blockattn::kTensorAlignmentBytes / static_cast<int64_t>(t.element_size());
  return t.stride(2) == 1 && t.stride(0) % multiple == 0 && t.stride(1) % multiple == 0 &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % blockattn::kTensorAlignmentBytes == 0;
}

// `t` itself when readable in place, else a contiguous copy (clone, not
// contiguous(): a contiguous but misaligned view would come back as is).
at::Tensor kernel_operand(const at::Tensor& t) {
  return readable_in_place(t) ? t : t.clone(at::MemoryFormat::Contiguous);
}

blockattn::TensorView view_of(const at::Tensor& t) {
  return {t.data_ptr(), t.stride(0), t.stride(1)};
}

// ---------------------------------------------------------------------------
// The accepted call
// ---------------------------------------------------------------------------

struct Call {
  blockattn::DType dtype;
  float scale;  // 0 = 1/sqrt(D), as the library reads it
  int block_size;
};

// The conditions under which this path runs the call (see the file comment);
// everything else is ops.py's.
bool accept(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& offsets, double scale,
            int64_t block_size, bool needs_grad, Call* call) {
  if (!q.defined() || !k.defined() || !v.defined() || !offsets.defined()) return false;
  const at::ScalarType st = q.scalar_type();
  if (st != at::kBFloat16 && st != at::kHalf) return false;
  if (k.scalar_type() != st || v.scalar_type() != st || offsets.scalar_type() != at::kInt) return false;
  if (!q.is_cuda() || k.device() != q.device() || v.device() != q.device() || offsets.device() != q.device())
    return false;
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3 || offsets.dim() != 1 || offsets.size(0) == 0) return false;
  if (!offsets.is_contiguous() || !k.sizes().equals(v.sizes())) return false;
  const int64_t tokens = q.size(0), hq = q.size(1), hkv = k.size(1), d = q.size(2);
  if (tokens == 0 || k.size(0) != tokens || k.size(2) != d || hkv == 0 || hq % hkv != 0) return false;
  if (tokens > std::numeric_limits<int32_t>::max() || hq > std::numeric_limits<int32_t>::max()) return false;
  // 0 is "default"; otherwise what fits in a positive normal float.
  if (scale != 0.0 && !(std::isfinite(scale) && scale >= FLT_MIN && scale <= FLT_MAX)) return false;
  if (block_size <= 0 || block_size > std::numeric_limits<int32_t>::max()) return false;
  if (!readable_in_place(q) || !readable_in_place(k) || !readable_in_place(v)) return false;
  const auto dtype = st == at::kBFloat16 ? blockattn::DType::kBF16 : blockattn::DType::kFP16;
  if (!has_plain_kernel(blockattn::Operation::kForward, dtype, d, block_size)) return false;
  if (needs_grad && !has_plain_kernel(blockattn::Operation::kBackward, dtype, d, block_size)) return false;
  *call = {dtype, static_cast<float>(scale), static_cast<int>(block_size)};
  return true;
}

void fill_inputs(blockattn::AttentionInputs* in, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& offsets, const Call& call) {
  in->shape.num_seqs = offsets.size(0) - 1;
  in->shape.total_tokens = q.size(0);
  in->shape.num_q_heads = static_cast<int>(q.size(1));
  in->shape.num_kv_heads = static_cast<int>(k.size(1));
  in->shape.head_dim = static_cast<int>(q.size(2));
  in->shape.dtype = call.dtype;
  in->shape.block_size = call.block_size;
  in->offsets = offsets.data_ptr<int32_t>();
  in->q = view_of(q);
  in->k = view_of(k);
  in->v = view_of(v);
  in->options.softmax_scale = call.scale;
}

const char* status_name(blockattn::StatusCode code) {
  switch (code) {
    case blockattn::StatusCode::kOk:
      return "OK";
    case blockattn::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case blockattn::StatusCode::kUnsupported:
      return "UNSUPPORTED";
    case blockattn::StatusCode::kCudaError:
      return "CUDA_ERROR";
  }
  return "UNKNOWN";
}

// The RuntimeError ops.py raises for a failed library call (_raise_on_failure).
void throw_on_failure(const blockattn::Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + " failed (" + status_name(s.code) + "): " + s.message);
}

// out, and in *schedule the workspace holding the block schedule (kept by the
// autograd node for the backward to reuse).
at::Tensor run_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& offsets,
                       const Call& call, at::Tensor* schedule) {
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty(q.sizes(), q.options());
  const size_t bytes = blockattn::workspace_size(offsets.size(0) - 1, q.size(0));
  *schedule = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
  blockattn::ForwardArgs args;
  fill_inputs(&args, q, k, v, offsets, call);
  args.out = view_of(out);
  throw_on_failure(blockattn::forward(args, schedule->data_ptr(), bytes,
                                      c10::cuda::getCurrentCUDAStream(q.get_device()).stream()),
                   "blockattn forward");
  return out;
}

variable_list run_backward(const at::Tensor& dout_in, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& offsets, const Call& call, const at::Tensor& schedule) {
  const c10::cuda::CUDAGuard guard(q.device());
  const at::Tensor dout = kernel_operand(dout_in);
  at::Tensor dq = at::empty(q.sizes(), q.options()), dk = at::empty(k.sizes(), k.options()),
             dv = at::empty(v.sizes(), v.options());
  blockattn::BackwardArgs args;
  fill_inputs(&args, q, k, v, offsets, call);
  args.dout = view_of(dout);
  args.dq = view_of(dq);
  args.dk = view_of(dk);
  args.dv = view_of(dv);
  args.options.reuse_schedule = true;  // the forward's, on the workspace it kept
  throw_on_failure(blockattn::backward(args, schedule.data_ptr(), static_cast<size_t>(schedule.numel()),
                                       c10::cuda::getCurrentCUDAStream(q.get_device()).stream()),
                   "blockattn backward");
  return {dq, dk, dv};
}

// ---------------------------------------------------------------------------
// Autograd: the same formula as ops.py's _BlockAttention, in C++
// ---------------------------------------------------------------------------

struct BlockAttentionFunction : torch::autograd::Function<BlockAttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& offsets, double scale, int64_t block_size, int64_t dtype) {
    const Call call{static_cast<blockattn::DType>(dtype), static_cast<float>(scale), static_cast<int>(block_size)};
    at::Tensor schedule;
    at::Tensor out = run_forward(q, k, v, offsets, call, &schedule);
    // The backward recomputes the probabilities: out is not saved.
    ctx->save_for_backward({q, k, v, offsets});
    ctx->saved_data["schedule"] = schedule;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["block_size"] = block_size;
    ctx->saved_data["dtype"] = dtype;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Call call{static_cast<blockattn::DType>(ctx->saved_data["dtype"].toInt()),
                    static_cast<float>(ctx->saved_data["scale"].toDouble()),
                    static_cast<int>(ctx->saved_data["block_size"].toInt())};
    variable_list g = run_backward(grads[0], saved[0], saved[1], saved[2], saved[3], call,
                                   ctx->saved_data["schedule"].toTensor());
    // One entry per forward argument: offsets, scale, block_size, dtype get none.
    return {g[0], g[1], g[2], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// block_attention's eager call, or None when this path does not take it.
// `scale` 0 means 1/sqrt(D): ops.py passes 0 for None and leaves a caller's
// 0 to its own route, which refuses it. ops.py calls this only outside
// torch.compile, dispatch and torch-function modes and functorch transforms.
py::object block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& offsets,
                           double scale, int64_t block_size) {
  const bool needs_grad =
      at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  Call call{};
  if (!accept(q, k, v, offsets, scale, block_size, needs_grad, &call)) return py::none();
  at::Tensor out;
  {
    // Nothing below touches Python objects; let other threads run, as
    // ctypes does for ops.py's route.
    const py::gil_scoped_release no_gil;
    if (needs_grad) {
      out = BlockAttentionFunction::apply(q, k, v, offsets, scale, block_size, static_cast<int64_t>(call.dtype));
    } else {
      at::Tensor schedule;
      out = run_forward(q, k, v, offsets, call, &schedule);
    }
  }
  return py::cast(out);
}

}  // namespace

PYBIND11_MODULE(_ext, m) {
  m.doc() = "blockattn's eager fast path (python/csrc/fast_path.cpp)";
  m.def("block_attention", &block_attention, "block_attention's eager call, or None when it is not taken here",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("offsets"), py::arg("scale"), py::arg("block_size"));
  m.attr("torch_version") = BLOCKATTN_TORCH_VERSION;
}
