// Public entry points: validate, build the on-device block schedule, pick and
// launch a kernel. Nothing here synchronizes or reads device memory.
#include "blockattn/blockattn.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/device_info.h"
#include "api/validate.h"
#include "hopper/params.h"
#include "hopper/tensor_map.h"
#include "portable/kernel_params.h"
#include "schedule/block_schedule.h"

namespace blockattn {
namespace {

using portable::KernelParams;

Status cuda_failure(cudaError_t err, const char* what) {
  return {StatusCode::kCudaError,
          std::string("blockattn: ") + what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")"};
}

Status cuda_status(cudaError_t err, const char* what) {
  return err == cudaSuccess ? Status::Ok() : cuda_failure(err, what);
}

portable::Strided strided(const TensorView& t) { return {t.data, t.token_stride, t.head_stride}; }

KernelParams make_params(const Shape& s, const Options& o, void* workspace) {
  KernelParams p{};
  p.num_q_heads = s.num_q_heads;
  p.group_size = s.num_q_heads / s.num_kv_heads;
  p.softmax_scale = o.softmax_scale != 0.f ? o.softmax_scale : 1.f / std::sqrt(static_cast<float>(s.head_dim));
  p.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  p.block_count = schedule::WorkspaceLayout::block_count(workspace);
  p.blocks = schedule::WorkspaceLayout::table(workspace);
  return p;
}

// Checks the device can run the kernels (sm_80+) and returns the number of
// persistent CTAs: as many as fit on the GPU, but no more than there can be
// tiles (the kernel reads the real tile count from the schedule).
Status persistent_grid(int ctas_per_sm, int64_t max_tiles, int* num_ctas) {
  const int cc = compute_capability();
  if (cc == 0) return cuda_failure(cudaGetLastError(), "querying the current device");
  if (cc < 80)
    return {StatusCode::kUnsupported, "blockattn: needs compute capability 8.0 or newer; device has " +
                                          std::to_string(cc / 10) + "." + std::to_string(cc % 10)};
  const int sms = multiprocessor_count();
  if (sms == 0 || ctas_per_sm == 0) return cuda_failure(cudaGetLastError(), "configuring the kernel");
  *num_ctas = static_cast<int>(std::min<int64_t>(max_tiles, int64_t{sms} * ctas_per_sm));
  return Status::Ok();
}

// Runs Launch<T, D>::run(args...) for the runtime dtype and head dim.
template <template <typename, int> class Launch, typename... Args>
Status dispatch(DType dtype, int head_dim, const Args&... args) {
  const bool bf16 = dtype == DType::kBF16;
  if (head_dim == 64) return bf16 ? Launch<__nv_bfloat16, 64>::run(args...) : Launch<__half, 64>::run(args...);
  return bf16 ? Launch<__nv_bfloat16, 128>::run(args...) : Launch<__half, 128>::run(args...);
}

bool nothing_to_do(const Shape& s) { return s.num_seqs == 0 || s.total_tokens == 0; }

Status build_schedule(const Shape& s, const int32_t* offsets, void* workspace, cudaStream_t stream) {
  return cuda_status(schedule::build_block_schedule(offsets, static_cast<int32_t>(s.num_seqs),
                                                    static_cast<int32_t>(s.total_tokens), workspace, stream),
                     "launching the block-schedule kernel");
}

bool portable_forced_by_environment() {
  const char* v = std::getenv("BLOCKATTN_FORCE_PORTABLE");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// Decides whether a call takes the sm_90 path; `encode_maps(&error)` builds
// its TMA maps and reports whether the tensors allow TMA. kAuto falls back to
// the portable path quietly; kHopper reports why it cannot run.
template <typename EncodeMaps>
Status select_hopper(Backend backend, EncodeMaps&& encode_maps, bool* use) {
  *use = false;
  if (backend == Backend::kAuto && portable_forced_by_environment()) backend = Backend::kPortable;
  if (backend == Backend::kPortable) return Status::Ok();
  const int cc = compute_capability();
  if (cc == 0) return cuda_failure(cudaGetLastError(), "querying the current device");
  if (cc != 90) {
    if (backend == Backend::kAuto) return Status::Ok();
    return {StatusCode::kUnsupported, "blockattn: backend kHopper needs compute capability 9.0; device has " +
                                          std::to_string(cc / 10) + "." + std::to_string(cc % 10)};
  }
  const char* error = nullptr;
  if (!encode_maps(&error)) {
    if (backend == Backend::kAuto) return Status::Ok();
    return {StatusCode::kUnsupported, std::string("blockattn: backend kHopper cannot run this call: ") + error};
  }
  *use = true;
  return Status::Ok();
}

bool encode_map(CUtensorMap* map, const TensorView& t, const Shape& s, int heads, const char** error) {
  return hopper::encode_head_tile_map(map, t, s.dtype, s.total_tokens, heads, s.head_dim, hopper::kBoxRows, error);
}

Status select_hopper_forward(const ForwardArgs& a, const KernelParams& p, bool* use, hopper::ForwardParams* hp) {
  const Shape& s = a.shape;
  auto encode = [&](const char** error) {
    return encode_map(&hp->q_map, a.q, s, s.num_q_heads, error) &&
           encode_map(&hp->k_map, a.k, s, s.num_kv_heads, error) &&
           encode_map(&hp->v_map, a.v, s, s.num_kv_heads, error);
  };
  if (Status st = select_hopper(a.options.backend, encode, use); !st.ok() || !*use) return st;
  hp->out = p.out;
  hp->num_q_heads = p.num_q_heads;
  hp->group_size = p.group_size;
  hp->scale_log2 = p.scale_log2;
  hp->block_count = p.block_count;
  hp->blocks = p.blocks;
  return Status::Ok();
}

Status select_hopper_backward(const BackwardArgs& a, const KernelParams& p, bool* use, hopper::BackwardParams* hp) {
  const Shape& s = a.shape;
  // At D = 64 the sm_90 backward measured slower than the portable one on the
  // headline workload (docs/perf.md), so kAuto keeps the portable kernel there.
  if (a.options.backend == Backend::kAuto && s.head_dim == 64) {
    *use = false;
    return Status::Ok();
  }
  auto encode = [&](const char** error) {
    if (s.num_q_heads != s.num_kv_heads) {
      *error = "its backward supports num_q_heads == num_kv_heads only (grouped-query attention runs on kPortable)";
      return false;
    }
    return encode_map(&hp->q_map, a.q, s, s.num_q_heads, error) &&
           encode_map(&hp->k_map, a.k, s, s.num_kv_heads, error) &&
           encode_map(&hp->v_map, a.v, s, s.num_kv_heads, error) &&
           encode_map(&hp->dout_map, a.dout, s, s.num_q_heads, error);
  };
  if (Status st = select_hopper(a.options.backend, encode, use); !st.ok() || !*use) return st;
  hp->dq = p.dq;
  hp->dk = p.dk;
  hp->dv = p.dv;
  hp->num_heads = s.num_q_heads;
  hp->softmax_scale = p.softmax_scale;
  hp->scale_log2 = p.scale_log2;
  hp->block_count = p.block_count;
  hp->blocks = p.blocks;
  return Status::Ok();
}

// What every launch does once its path is chosen: size the persistent grid,
// enqueue the block schedule, then `launch(num_ctas)`.
template <typename Launch>
Status launch_persistent(const Shape& s, const int32_t* offsets, int heads_per_block, int ctas_per_sm, void* workspace,
                         cudaStream_t stream, const char* what, Launch&& launch) {
  const int64_t max_tiles = schedule::max_blocks(s.num_seqs, s.total_tokens) * heads_per_block;
  int num_ctas = 0;
  if (Status st = persistent_grid(ctas_per_sm, max_tiles, &num_ctas); !st.ok()) return st;
  if (Status st = build_schedule(s, offsets, workspace, stream); !st.ok()) return st;
  return cuda_status(launch(num_ctas), what);
}

template <typename T, int D>
struct ForwardLaunch {
  static Status run(const ForwardArgs& a, const KernelParams& p, void* workspace, cudaStream_t stream) {
    bool hopper_path = false;
    hopper::ForwardParams hp;
    if (Status st = select_hopper_forward(a, p, &hopper_path, &hp); !st.ok()) return st;
    const int ctas_per_sm = hopper_path ? hopper::forward_ctas_per_sm<T, D>() : portable::forward_ctas_per_sm<T, D>();
    return launch_persistent(a.shape, a.offsets, a.shape.num_q_heads, ctas_per_sm, workspace, stream,
                             "launching the forward kernel", [&](int num_ctas) {
                               return hopper_path ? hopper::launch_forward<T, D>(hp, num_ctas, stream)
                                                  : portable::launch_forward<T, D>(p, num_ctas, stream);
                             });
  }
};

template <typename T, int D>
struct BackwardLaunch {
  static Status run(const BackwardArgs& a, const KernelParams& p, void* workspace, cudaStream_t stream) {
    bool hopper_path = false;
    hopper::BackwardParams hp;
    if (Status st = select_hopper_backward(a, p, &hopper_path, &hp); !st.ok()) return st;
    const int ctas_per_sm = hopper_path ? hopper::backward_ctas_per_sm<T, D>() : portable::backward_ctas_per_sm<T, D>();
    return launch_persistent(a.shape, a.offsets, a.shape.num_kv_heads, ctas_per_sm, workspace, stream,
                             "launching the backward kernel", [&](int num_ctas) {
                               return hopper_path ? hopper::launch_backward<T, D>(hp, num_ctas, stream)
                                                  : portable::launch_backward<T, D>(p, num_ctas, stream);
                             });
  }
};

}  // namespace

size_t workspace_size(int64_t num_seqs, int64_t total_tokens) {
  return schedule::WorkspaceLayout::bytes(std::max<int64_t>(num_seqs, 0), std::max<int64_t>(total_tokens, 0));
}

const char* dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

Status forward(const ForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (Status s = validate_forward(a, workspace, workspace_bytes); !s.ok()) return s;
  const Shape& s = a.shape;
  if (nothing_to_do(s)) return Status::Ok();

  KernelParams p = make_params(s, a.options, workspace);
  p.q = strided(a.q);
  p.k = strided(a.k);
  p.v = strided(a.v);
  p.out = strided(a.out);
  return dispatch<ForwardLaunch>(s.dtype, s.head_dim, a, p, workspace, stream);
}

Status forward_backend(const ForwardArgs& a, Backend* chosen) {
  if (Status s = validate_forward_tensors(a); !s.ok()) return s;
  bool hopper_path = false;
  hopper::ForwardParams hp;
  if (Status s = select_hopper_forward(a, KernelParams{}, &hopper_path, &hp); !s.ok()) return s;
  *chosen = hopper_path ? Backend::kHopper : Backend::kPortable;
  return Status::Ok();
}

Status backward_backend(const BackwardArgs& a, Backend* chosen) {
  if (Status s = validate_backward_tensors(a); !s.ok()) return s;
  bool hopper_path = false;
  hopper::BackwardParams hp;
  if (Status s = select_hopper_backward(a, KernelParams{}, &hopper_path, &hp); !s.ok()) return s;
  *chosen = hopper_path ? Backend::kHopper : Backend::kPortable;
  return Status::Ok();
}

Status backward(const BackwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (Status s = validate_backward(a, workspace, workspace_bytes); !s.ok()) return s;
  const Shape& s = a.shape;
  if (nothing_to_do(s)) return Status::Ok();

  KernelParams p = make_params(s, a.options, workspace);
  p.q = strided(a.q);
  p.k = strided(a.k);
  p.v = strided(a.v);
  p.dout = strided(a.dout);
  p.dq = strided(a.dq);
  p.dk = strided(a.dk);
  p.dv = strided(a.dv);
  return dispatch<BackwardLaunch>(s.dtype, s.head_dim, a, p, workspace, stream);
}

}  // namespace blockattn
