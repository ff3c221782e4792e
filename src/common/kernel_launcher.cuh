// Host side of a persistent kernel: raising its shared-memory limit and reading
// its occupancy once per device, and the launch itself. Both backends define
// their launch()/ctas_per_sm() templates through this and instantiate them
// with BLOCKATTN_INSTANTIATE_KERNEL from the generated per-kernel sources.
#pragma once

#include "core/device_info.h"

namespace blockattn {

template <typename Params, void (*Kernel)(Params), int kThreads, int kSmemBytes>
struct KernelLauncher {
  // Resident CTAs per SM on the current device; 0 if the runtime failed.
  static int ctas_per_sm() {
    static core::PerDeviceCache cache;
    return cache.get([] {
      int ctas = 0;
      if (cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess ||
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, Kernel, kThreads, kSmemBytes) != cudaSuccess)
        return 0;
      return ctas;
    });
  }
  static cudaError_t launch(const Params& p, int num_ctas, cudaStream_t stream) {
    Kernel<<<num_ctas, kThreads, kSmemBytes, stream>>>(p);
    return cudaGetLastError();
  }
};

// The launcher of kernel KernelOf<Op, T, D, B> (a backend's map from a table
// row to its kernel function and config).
template <template <Operation, typename, int, int> class KernelOf, Operation Op, typename T, int D, int B>
using LauncherOf = KernelLauncher<typename KernelOf<Op, T, D, B>::Params, KernelOf<Op, T, D, B>::kernel,
                                  KernelOf<Op, T, D, B>::Config::kThreads, KernelOf<Op, T, D, B>::Config::kSmemBytes>;

}  // namespace blockattn

// Explicit instantiation of a backend's launch<Op, T, D, B>() and
// ctas_per_sm<Op, T, D, B>() (declared in its params.h, defined in its
// launch.cuh) for one table row; used by the generated sources only.
#define BLOCKATTN_INSTANTIATE_KERNEL(Op, T, D, B)                                                        \
  template cudaError_t launch<::blockattn::Operation::k##Op, T, D, B>(const Params&, int, cudaStream_t); \
  template int ctas_per_sm<::blockattn::Operation::k##Op, T, D, B>();
