// Programmatic dependent launch (PDL, sm_90 and later): a kernel launched
// with cudaLaunchAttributeProgrammaticStreamSerialization may be placed on
// the SMs while the kernel before it on the stream still runs, so that its
// launch and its CTAs' start overlap that kernel's last CTAs instead of
// following its completion. Every call of block attention is a schedule
// kernel and then the attention kernel; without this the attention kernel's
// launch gap is paid on every call (docs/perf.md, "Session 40").
//
// The price is one rule. A kernel launched this way must call
// wait_for_prior_grids() before it touches any global memory that earlier
// work on the stream writes or reads (its inputs, the schedule, the claim
// counters, its outputs): the wait returns once every earlier kernel has
// completed and its writes are visible. The wait compiles to nothing in a
// pre-sm_90 pass, so a kernel may be launched overlapped only where the code
// the runtime loaded comes from an sm_90 pass (loaded_code_waits_for_prior_grids):
// the attention kernels whose configs say kWaitsForPriorGrids (the sm90
// backend's, and the sm80 forwards at D >= 224 where their sm_90a pass is
// loaded; KernelLauncher checks per device) and the schedule's where
// schedule_overlaps_its_neighbours() (block_schedule.h).
#pragma once

#include <cuda_runtime.h>

namespace blockattn {

// Device side: waits until the kernels before this one on the stream have
// completed and flushed their writes (a no-op when launched without PDL).
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// Device side: once every CTA of this kernel has called it (or exited), the
// next kernel on the stream, if launched with PDL, may start its CTAs; they
// wait in wait_for_prior_grids() until this kernel completes. It promises
// nothing about memory, so a kernel may call it first thing. Without it (or
// in a pre-sm_90 pass) the next kernel starts when this one's CTAs exit.
__device__ __forceinline__ void let_next_grid_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Host side: whether the code the runtime loaded for `kernel` on the current
// device comes from an sm_90 or later pass, where wait_for_prior_grids() is
// not a no-op. A runtime query: callers keep the answer per device.
template <typename... KernelArgs>
bool loaded_code_waits_for_prior_grids(void (*kernel)(KernelArgs...)) {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.ptxVersion >= 90;
}

// Host side: launches `kernel` on `stream`, allowed to overlap the kernel
// before it where `overlap` (the rule above; only code from an sm_90 pass is
// launched so, so a GPU older than Hopper never sees the attribute), else
// as a plain launch. Under stream capture the overlap becomes a
// programmatic edge of the graph (tests/gpu: CudaGraph).
template <typename... KernelArgs, typename... Args>
cudaError_t launch_after_prior_grids(bool overlap, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                                     size_t smem_bytes, cudaStream_t stream, Args&&... args) {
  if (!overlap) {
    kernel<<<grid, block, smem_bytes, stream>>>(static_cast<Args&&>(args)...);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, kernel, static_cast<Args&&>(args)...);
  return cudaGetLastError();
}

}  // namespace blockattn
