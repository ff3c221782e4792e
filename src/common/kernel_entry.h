// A backend's launch table: one entry per row of the generated kernel table
// that belongs to the backend, holding the instantiated launch and occupancy
// functions. Each backend expands blockattn_kernel_table.inc into an array of
// these (sm80/backend.cpp, sm90/backend.cpp) and looks problems up here.
#pragma once

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "core/batch_kind.h"
#include "core/device_info.h"
#include "core/problem.h"
#include "core/status.h"

namespace blockattn {

// What chooses among a table row's kernels (its variants: KernelOf in
// common/kernel_launcher.cuh): the kind of batch, whether the problem's
// query heads are grouped (num_q_heads != num_kv_heads), and whether the
// host staged the rotary tables' rows for TMA copies (sm90's
// Params::staged_angles, set by its backend after kernel_variant()), each
// of which a row may serve with a kernel of its own.
struct KernelVariant {
  BatchKind batch;
  bool grouped_heads;  // takes_grouped_kernel(): the row's Grouped kernel, where it has one
  bool staged_tables = false;
};
inline KernelVariant kernel_variant(const core::Problem& p) {
  const BatchKind batch = batch_kind(p, core::DeviceTraits{core::memory_peak_gbps()});
  return {batch, takes_grouped_kernel(p, batch)};
}

// Launch on `num_ctas` persistent CTAs, and resident CTAs per SM (an occupancy
// query that also raises the dynamic shared-memory limit once per device; 0
// if the runtime refused the configuration) of the kernel of one table row
// for a problem of that variant. Defined in common/kernel_launcher.cuh,
// instantiated by the generated sources; backends (plain C++) only take
// their addresses.
template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
cudaError_t launch_kernel(const Params& p, KernelVariant variant, int num_ctas, cudaStream_t stream);
template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
int kernel_ctas_per_sm(KernelVariant variant);
// Whether the variant's kernel stores its outputs through TMA maps that the
// host must encode (its config's kStoresByTma).
template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
bool kernel_stores_by_tma(KernelVariant variant);

template <typename Params>
struct KernelEntry {
  Operation operation;
  DType dtype;
  int head_dim;
  int block_size;
  core::Fusion fusion;
  cudaError_t (*launch)(const Params&, KernelVariant, int num_ctas, cudaStream_t);
  int (*ctas_per_sm)(KernelVariant);  // 0 when the runtime refused the configuration
  bool (*stores_by_tma)(KernelVariant);
};

// The entry for the problem's combination, or null. Entries with a null
// launch are the terminators that keep an arch's array non-empty in builds
// restricted to other kernels.
template <typename Params, size_t kN>
const KernelEntry<Params>* find_entry(const KernelEntry<Params> (&entries)[kN], const core::Problem& p) {
  for (const KernelEntry<Params>& e : entries)
    if (e.launch != nullptr && e.operation == p.operation && e.dtype == p.shape.dtype &&
        e.head_dim == p.shape.head_dim && e.block_size == p.shape.block_size && e.fusion == p.fusion())
      return &e;
  return nullptr;
}

// Sizes the persistent grid for up to `max_tiles` tiles and launches the
// row's kernel for the problem's variant.
template <typename Params>
Status launch_persistent(const KernelEntry<Params>& kernel, KernelVariant variant, const Params& params,
                         int64_t max_tiles, cudaStream_t stream, const char* what) {
  int num_ctas = 0;
  BLOCKATTN_RETURN_IF_ERROR(core::persistent_grid(kernel.ctas_per_sm(variant), max_tiles, &num_ctas));
  return core::cuda_status(kernel.launch(params, variant, num_ctas, stream), what);
}
template <typename Params>
Status launch_persistent(const KernelEntry<Params>& kernel, const core::Problem& p, const Params& params,
                         int64_t max_tiles, cudaStream_t stream, const char* what) {
  return launch_persistent(kernel, kernel_variant(p), params, max_tiles, stream, what);
}

}  // namespace blockattn

// Expands the generated kernel table into KernelEntry initializers for one
// backend, in a scope where `Params` names its kernel arguments.
#define BLOCKATTN_KERNEL_ENTRY(Op, DT, Type, D, B, Auto, Fuse)                       \
  {Operation::k##Op,                                                                 \
   DType::k##DT,                                                                     \
   D,                                                                                \
   B,                                                                                \
   core::Fusion::k##Fuse,                                                            \
   &launch_kernel<Params, Operation::k##Op, Type, D, B, core::Fusion::k##Fuse>,      \
   &kernel_ctas_per_sm<Params, Operation::k##Op, Type, D, B, core::Fusion::k##Fuse>, \
   &kernel_stores_by_tma<Params, Operation::k##Op, Type, D, B, core::Fusion::k##Fuse>},
#define BLOCKATTN_KERNEL_SKIP(Op, DT, Type, D, B, Auto, Fuse)
