// A backend's dense-forward launch table: one entry per row of the generated
// dense kernel table that belongs to the backend, with the launch and
// occupancy functions of its non-causal and causal instantiations. The dense
// counterpart of common/kernel_entry.h (same launcher, same persistent grid).
#pragma once

#include <cuda_runtime_api.h>

#include "blockattn/dense.h"
#include "core/dense_problem.h"
#include "core/device_info.h"
#include "core/status.h"

namespace blockattn {

// Defined in common/kernel_launcher.cuh, instantiated by the generated sources.
template <typename Params, typename T, int D, bool kCausal>
cudaError_t launch_dense_kernel(const Params& p, int num_ctas, cudaStream_t stream);
template <typename Params, typename T, int D, bool kCausal>
int dense_kernel_ctas_per_sm();

template <typename Params>
struct DenseKernelEntry {
  DType dtype;
  int head_dim;
  cudaError_t (*launch[2])(const Params&, int num_ctas, cudaStream_t);  // [causal]
  int (*ctas_per_sm[2])();                                              // [causal]; 0 when refused
};

template <typename Params, size_t kN>
const DenseKernelEntry<Params>* find_dense_entry(const DenseKernelEntry<Params> (&entries)[kN],
                                                 const core::DenseProblem& p) {
  for (const DenseKernelEntry<Params>& e : entries)
    if (e.launch[0] != nullptr && e.dtype == p.shape.dtype && e.head_dim == p.shape.head_dim) return &e;
  return nullptr;
}

inline Status no_dense_kernel(const char* backend, const core::DenseProblem& p) {
  return core::unsupported("backend ", backend, " has no dense forward kernel for ", dtype_name(p.shape.dtype),
                           ", head_dim ", p.shape.head_dim, " in this build (dense_configs() lists what it has)");
}

// A persistent grid over `num_items` work items, and the launch.
template <typename Params>
Status launch_dense(const DenseKernelEntry<Params>& kernel, const Params& params, bool causal, int num_items,
                    cudaStream_t stream, const char* what) {
  int num_ctas = 0;
  BLOCKATTN_RETURN_IF_ERROR(core::persistent_grid(kernel.ctas_per_sm[causal](), num_items, &num_ctas));
  return core::cuda_status(kernel.launch[causal](params, num_ctas, stream), what);
}

}  // namespace blockattn

// Expands the generated dense table into entries for one backend, in a scope
// where `Params` names its dense kernel arguments.
#define BLOCKATTN_DENSE_KERNEL_ENTRY(DT, Type, D, Auto)                                                  \
  {DType::k##DT,                                                                                         \
   D,                                                                                                    \
   {&launch_dense_kernel<Params, Type, D, false>, &launch_dense_kernel<Params, Type, D, true>},         \
   {&dense_kernel_ctas_per_sm<Params, Type, D, false>, &dense_kernel_ctas_per_sm<Params, Type, D, true>}},
#define BLOCKATTN_DENSE_KERNEL_SKIP(DT, Type, D, Auto)
