// Facts about the current CUDA device that the host code needs on every call,
// read from the runtime once per device.
#pragma once

#include <atomic>

#include <cuda_runtime_api.h>

namespace blockattn {

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

 private:
  static constexpr int kMaxDevices = 64;
  std::atomic<int> values_[kMaxDevices] = {};
};

// Of the current device; 0 when the runtime fails.
int multiprocessor_count();
int compute_capability();  // major * 10 + minor

}  // namespace blockattn
