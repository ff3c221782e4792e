// Host side of a persistent kernel: raising its shared-memory limit and reading
// its occupancy once per device, and the launch itself.
#pragma once

#include "api/device_info.h"

namespace blockattn {

template <typename Params, void (*Kernel)(Params), int kThreads, int kSmemBytes>
struct KernelLauncher {
  // Resident CTAs per SM on the current device; 0 if the runtime failed.
  static int ctas_per_sm() {
    static PerDeviceCache cache;
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

}  // namespace blockattn
