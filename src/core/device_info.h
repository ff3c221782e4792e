// Facts about the current CUDA device that the host code needs on every call,
// read from the runtime once per device.
#pragma once

#include <atomic>

#include <cstdint>

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"

namespace blockattn::core {

// A per-device memo of one positive integer. Values are computed on the
// current device the first time it asks; a non-positive result (an error) is
// not stored, so the next call retries.
class PerDeviceCache {
 public:
  template <typename Compute>
  int get(Compute compute) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 0;
    int value = values_[device].load(std::memory_order_relaxed);
    if (value > 0) return value;
    value = compute();
    if (value > 0) values_[device].store(value, std::memory_order_relaxed);
    return value;
  }
  // A yes/no fact, kept as 2 or 1 (0 is "not read yet"); false when the
  // runtime fails.
  template <typename Compute>
  bool get_flag(Compute compute) {
    return get([&] { return compute() ? 2 : 1; }) == 2;
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::atomic<int> values_[kMaxDevices] = {};
};

// Of the current device; 0 when the runtime fails.
int multiprocessor_count();
int compute_capability();  // major * 10 + minor
// The memory's peak bandwidth in GB/s (two transfers a clock x bus width),
// as the device reports it: 3,352 on an H100 SXM, 4,800 on an H200.
int memory_peak_gbps();
// schedule::schedule_overlaps_its_neighbours(), read once per device: whether
// the schedule kernels may be launched overlapping the kernel before them.
bool schedule_overlaps_prior_kernels();

// kUnsupported unless the current device has at least compute capability
// `minimum` (major * 10 + minor); kCudaError if it cannot be queried.
Status require_compute_capability(int minimum, const char* who);
// Same, for exactly this compute capability (arch-specific targets like sm_90a).
Status require_exact_compute_capability(int wanted, const char* who);

// Makes the current device's primary context current in the calling thread
// (runtime calls do this implicitly; driver entry points called directly,
// like cuTensorMapEncodeTiled, need it done first).
Status make_device_current();

// How many persistent CTAs to launch: as many as fit on the GPU
// (ctas_per_sm per SM), but no more than there can be tiles (the kernel reads
// the real tile count from the schedule). ctas_per_sm == 0 means the runtime
// refused the kernel's configuration.
Status persistent_grid(int ctas_per_sm, int64_t max_tiles, int* num_ctas);

// Tests only: caps the CTAs persistent_grid() gives at max_ctas (0: no cap),
// so that a small problem has every CTA walk many tiles, as a headline-size
// one does on a full GPU, and the state kernels carry from tile to tile is
// exercised. Process-wide; not part of the public API.
void set_persistent_grid_cap_for_testing(int max_ctas);

// Tests only: memory_peak_gbps() returns `gbps` (0: the device's own), so
// that the choices made for fast memory (core::DeviceTraits: batch kinds,
// kAuto, the sm_90 backward's store walk) run and are checked on any GPU.
// Process-wide; not part of the public API.
void set_memory_peak_for_testing(int gbps);

}  // namespace blockattn::core
