// Host side of a persistent kernel: raising its shared-memory limit and reading
// its occupancy once per device, and the launch itself; the one definition of
// every backend's launch and occupancy functions (common/kernel_entry.h).
#pragma once

#include <type_traits>
#include <utility>

#include "common/dense_kernel_entry.h"
#include "common/kernel_entry.h"
#include "core/device_info.h"
#include "schedule/programmatic_launch.cuh"

namespace blockattn {

// A config's kStoresByTma where it has one; a kernel without it stores its
// outputs itself.
template <typename Config, typename = void>
constexpr bool kConfigStoresByTma = false;
template <typename Config>
constexpr bool kConfigStoresByTma<Config, std::void_t<decltype(Config::kStoresByTma)>> = Config::kStoresByTma;

// A config's kWaitsForPriorGrids where it has one: its kernel calls
// wait_for_prior_grids() before touching global memory, so it may be
// launched overlapping the kernel before it (schedule/programmatic_launch.cuh).
template <typename Config, typename = void>
constexpr bool kConfigWaitsForPriorGrids = false;
template <typename Config>
constexpr bool kConfigWaitsForPriorGrids<Config, std::void_t<decltype(Config::kWaitsForPriorGrids)>> =
    Config::kWaitsForPriorGrids;

// A config's launch_smem_bytes(params) where it has one: the dynamic shared
// memory of one launch, at most kSmemBytes (a kernel with a region it uses on
// some launches only: less shared memory leaves the SM more L1).
template <typename Config, typename Params, typename = void>
struct ConfigLaunchSmem {
  static int bytes(const Params&) { return Config::kSmemBytes; }
};
template <typename Config, typename Params>
struct ConfigLaunchSmem<Config, Params, std::void_t<decltype(Config::launch_smem_bytes(std::declval<Params>()))>> {
  static int bytes(const Params& p) { return Config::launch_smem_bytes(p); }
};

template <typename Params, void (*Kernel)(Params), typename Config>
struct KernelLauncher {
  static constexpr int kThreads = Config::kThreads, kSmemBytes = Config::kSmemBytes;
  // Whether the kernel stores its outputs through TMA, from maps the host
  // encodes.
  static constexpr bool kStoresByTma = kConfigStoresByTma<Config>;

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
  // Whether the code the runtime loaded for this device has the wait (a
  // pass for sm_90 or later: wait_for_prior_grids() is a no-op in older
  // ones), read once per device. Only then is the kernel launched
  // overlapping the one before it.
  static bool waits_for_prior_grids() {
    if constexpr (!kConfigWaitsForPriorGrids<Config>) {
      return false;
    } else {
      static core::PerDeviceCache cache;
      return cache.get_flag([] { return loaded_code_waits_for_prior_grids(Kernel); });
    }
  }
  static cudaError_t launch(const Params& p, int num_ctas, cudaStream_t stream) {
    return launch_after_prior_grids(waits_for_prior_grids(), Kernel, num_ctas, kThreads,
                                    ConfigLaunchSmem<Config, Params>::bytes(p), stream, p);
  }
};

// The kernel of one table row: each backend's kernel headers specialize
// KernelOf<their Params, Op, T, D, B, F> with the kernel function (`kernel`)
// and its config (`Config::kThreads`, `Config::kSmemBytes`), and may add
// nested variants with the same two members: `ShortSequences`, `FewBlocks`
// and `ManyBlocks`, the row's kernels for BatchKind::kShort, kFewBlocks and
// kManyBlocks (core/batch_kind.h), `Grouped`, its kernel for grouped
// query heads, and `StagedTables`, its kernel where the host
// staged the rotary tables' rows (KernelVariant).
template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
struct KernelOf;

// ShortSequencesOf, FewBlocksOf and ManyBlocksOf: NameOf<Of>::type is the
// row's nested variant `Name` where it has one, else
// the row's kernel itself, which then serves that kind of batch too.
#define BLOCKATTN_BATCH_VARIANT_OF(Name)                \
  template <typename Of, typename = void>               \
  struct Name##Of {                                     \
    using type = Of;                                    \
  };                                                    \
  template <typename Of>                                \
  struct Name##Of<Of, std::void_t<typename Of::Name>> { \
    using type = typename Of::Name;                     \
  };
BLOCKATTN_BATCH_VARIANT_OF(ShortSequences)
BLOCKATTN_BATCH_VARIANT_OF(FewBlocks)
BLOCKATTN_BATCH_VARIANT_OF(ManyBlocks)
#undef BLOCKATTN_BATCH_VARIANT_OF
template <typename Of, typename = void>
constexpr bool kHasGroupedVariant = false;  // the row's kernel serves grouped heads itself, or its backend refuses them
template <typename Of>
constexpr bool kHasGroupedVariant<Of, std::void_t<typename Of::Grouped>> = true;
template <typename Of, typename = void>
constexpr bool kHasStagedTablesVariant = false;  // the row's kernels stage no table rows, or stage them themselves
template <typename Of>
constexpr bool kHasStagedTablesVariant<Of, std::void_t<typename Of::StagedTables>> = true;

template <typename Params, typename Of>
using LauncherFor = KernelLauncher<Params, Of::kernel, typename Of::Config>;

// fn(LauncherFor<the variant's kernel>{}): Grouped where the problem's heads
// are grouped and the row has it, else the short-sequence kernel for short
// batches, else StagedTables where the host staged the tables' rows and the
// row has it (the host stages them only for batches that kernel serves),
// else the variant of the batch's kind where the row has one, else the
// row's kernel.
template <typename Params, typename Of, typename Fn>
auto with_variant(KernelVariant variant, Fn&& fn) {
  if constexpr (kHasGroupedVariant<Of>)
    if (variant.grouped_heads) return fn(LauncherFor<Params, typename Of::Grouped>{});
  if (variant.batch == BatchKind::kShort) return fn(LauncherFor<Params, typename ShortSequencesOf<Of>::type>{});
  if constexpr (kHasStagedTablesVariant<Of>)
    if (variant.staged_tables) return fn(LauncherFor<Params, typename Of::StagedTables>{});
  if (variant.batch == BatchKind::kFewBlocks) return fn(LauncherFor<Params, typename FewBlocksOf<Of>::type>{});
  if (variant.batch == BatchKind::kManyBlocks) return fn(LauncherFor<Params, typename ManyBlocksOf<Of>::type>{});
  return fn(LauncherFor<Params, Of>{});
}

// The definitions of the functions common/kernel_entry.h declares.
template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
cudaError_t launch_kernel(const Params& p, KernelVariant variant, int num_ctas, cudaStream_t stream) {
  return with_variant<Params, KernelOf<Params, Op, T, D, B, F>>(
      variant, [&](auto launcher) { return decltype(launcher)::launch(p, num_ctas, stream); });
}

template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
int kernel_ctas_per_sm(KernelVariant variant) {
  return with_variant<Params, KernelOf<Params, Op, T, D, B, F>>(
      variant, [](auto launcher) { return decltype(launcher)::ctas_per_sm(); });
}
template <typename Params, Operation Op, typename T, int D, int B, core::Fusion F>
bool kernel_stores_by_tma(KernelVariant variant) {
  return with_variant<Params, KernelOf<Params, Op, T, D, B, F>>(
      variant, [](auto launcher) { return decltype(launcher)::kStoresByTma; });
}

// The dense forward's kernels, the same way: each backend's dense kernel
// header specializes DenseKernelOf<its DenseParams, T, D, kCausal>.
template <typename Params, typename T, int D, bool kCausal>
struct DenseKernelOf;

template <typename Params, typename T, int D, bool kCausal>
using DenseLauncherOf = KernelLauncher<Params, DenseKernelOf<Params, T, D, kCausal>::kernel,
                                       typename DenseKernelOf<Params, T, D, kCausal>::Config>;

template <typename Params, typename T, int D, bool kCausal>
cudaError_t launch_dense_kernel(const Params& p, int num_ctas, cudaStream_t stream) {
  return DenseLauncherOf<Params, T, D, kCausal>::launch(p, num_ctas, stream);
}

template <typename Params, typename T, int D, bool kCausal>
int dense_kernel_ctas_per_sm() {
  return DenseLauncherOf<Params, T, D, kCausal>::ctas_per_sm();
}

}  // namespace blockattn

// Registers `Arch::kernel_fn<T, D, B, F>` with config `Arch::ConfigT<T, D, B>`
// as the kernel of table rows (Arch, Op); written after the kernel's
// definition, outside any namespace.
#define BLOCKATTN_KERNEL_OF(Arch, Op, kernel_fn, ConfigT)       \
  namespace blockattn {                                         \
  template <typename T, int D, int B, core::Fusion F>           \
  struct KernelOf<Arch::Params, Operation::k##Op, T, D, B, F> { \
    using Config = Arch::ConfigT<T, D, B>;                      \
    static constexpr auto kernel = Arch::kernel_fn<T, D, B, F>; \
  };                                                            \
  }

// Explicit instantiation of launch_kernel(), kernel_ctas_per_sm() and
// kernel_stores_by_tma() for one table row; used by the generated sources
// only (cmake/BlockattnKernels.cmake).
#define BLOCKATTN_INSTANTIATE_KERNEL(Params, Op, T, D, B, F)                                                  \
  namespace blockattn {                                                                                       \
  template cudaError_t launch_kernel<Params, Operation::k##Op, T, D, B, F>(const Params&, KernelVariant, int, \
                                                                           cudaStream_t);                     \
  template int kernel_ctas_per_sm<Params, Operation::k##Op, T, D, B, F>(KernelVariant);                       \
  template bool kernel_stores_by_tma<Params, Operation::k##Op, T, D, B, F>(KernelVariant);                    \
  }

// Registers `Arch::kernel_fn<T, D, kCausal>` with config `Arch::ConfigT<T, D>`
// as the dense forward kernel of backend Arch.
#define BLOCKATTN_DENSE_KERNEL_OF(Arch, kernel_fn, ConfigT)        \
  namespace blockattn {                                            \
  template <typename T, int D, bool kCausal>                       \
  struct DenseKernelOf<Arch::DenseParams, T, D, kCausal> {         \
    using Config = Arch::ConfigT<T, D>;                            \
    static constexpr auto kernel = Arch::kernel_fn<T, D, kCausal>; \
  };                                                               \
  }

// Both instantiations (non-causal, causal) of one dense table row.
#define BLOCKATTN_INSTANTIATE_DENSE_KERNEL(Params, T, D)                                           \
  namespace blockattn {                                                                            \
  template cudaError_t launch_dense_kernel<Params, T, D, false>(const Params&, int, cudaStream_t); \
  template cudaError_t launch_dense_kernel<Params, T, D, true>(const Params&, int, cudaStream_t);  \
  template int dense_kernel_ctas_per_sm<Params, T, D, false>();                                    \
  template int dense_kernel_ctas_per_sm<Params, T, D, true>();                                     \
  }
