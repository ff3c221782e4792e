// A backend's launch table: one entry per row of the generated kernel table
// that belongs to the backend, holding the instantiated launch and occupancy
// functions. Each backend expands blockattn_kernel_table.inc into an array of
// these (sm80/backend.cpp, sm90/backend.cpp) and looks problems up here.
#pragma once

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "core/problem.h"
#include "core/status.h"

namespace blockattn {

template <typename Params>
struct KernelEntry {
  Operation operation;
  DType dtype;
  int head_dim;
  int block_size;
  cudaError_t (*launch)(const Params&, int num_ctas, cudaStream_t);
  int (*ctas_per_sm)();  // 0 when the runtime refused the configuration
};

// The entry for the problem's combination, or null. Entries with a null
// launch are the terminators that keep an arch's array non-empty in builds
// restricted to other kernels.
template <typename Params, size_t kN>
const KernelEntry<Params>* find_entry(const KernelEntry<Params> (&entries)[kN], const core::Problem& p) {
  for (const KernelEntry<Params>& e : entries)
    if (e.launch != nullptr && e.operation == p.operation && e.dtype == p.shape.dtype &&
        e.head_dim == p.shape.head_dim && e.block_size == p.shape.block_size)
      return &e;
  return nullptr;
}

// The reason a backend gives when its table has no such kernel.
inline Status no_kernel(const char* backend, const core::Problem& p) {
  return core::unsupported("backend ", backend, " has no ", operation_name(p.operation), " kernel for ",
                           dtype_name(p.shape.dtype), ", head_dim ", p.shape.head_dim, ", block_size ",
                           p.shape.block_size, " in this build (supported_configs() lists what it has)");
}

}  // namespace blockattn

// Expands the generated kernel table into KernelEntry initializers for one
// architecture `arch` (sm80 or sm90), followed by the terminator.
#define BLOCKATTN_KERNEL_ENTRY(Op, DT, Type, D, B, Auto) \
  {Operation::k##Op,                                     \
   DType::k##DT,                                         \
   D,                                                    \
   B,                                                    \
   &launch<Operation::k##Op, Type, D, B>,                \
   &ctas_per_sm<Operation::k##Op, Type, D, B>},
#define BLOCKATTN_KERNEL_SKIP(Op, DT, Type, D, B, Auto)
