#include "core/device_info.h"

#include <algorithm>
#include <atomic>

#include "core/status.h"
#include "schedule/block_schedule.h"

namespace blockattn::core {
namespace {

int device_attribute(cudaDeviceAttr attr) {
  int device = 0, value = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) return 0;
  return value;
}

}  // namespace

int multiprocessor_count() {
  static PerDeviceCache cache;
  return cache.get([] { return device_attribute(cudaDevAttrMultiProcessorCount); });
}

int compute_capability() {
  static PerDeviceCache cache;
  return cache.get([] {
    return 10 * device_attribute(cudaDevAttrComputeCapabilityMajor) +
           device_attribute(cudaDevAttrComputeCapabilityMinor);
  });
}

bool schedule_overlaps_prior_kernels() {
  static PerDeviceCache cache;
  return cache.get_flag([] { return schedule::schedule_overlaps_its_neighbours(); });
}

namespace {
std::atomic<int> memory_peak_for_testing{0};  // set_memory_peak_for_testing
}  // namespace

int memory_peak_gbps() {
  const int forced = memory_peak_for_testing.load(std::memory_order_relaxed);
  if (forced > 0) return forced;
  static PerDeviceCache cache;
  return cache.get([] {
    const int64_t clock_khz = device_attribute(cudaDevAttrMemoryClockRate);
    const int64_t bus_bytes = device_attribute(cudaDevAttrGlobalMemoryBusWidth) / 8;
    return static_cast<int>(2 * clock_khz * bus_bytes / 1000000);  // kB/s -> GB/s
  });
}

namespace {

std::atomic<int> grid_cap_for_testing{0};  // set_persistent_grid_cap_for_testing

Status capability_error(int cc, const char* who, const char* relation, int wanted) {
  return unsupported(who, " needs compute capability ", relation, wanted / 10, ".", wanted % 10, "; device has ",
                     cc / 10, ".", cc % 10);
}

}  // namespace

Status require_compute_capability(int minimum, const char* who) {
  const int cc = compute_capability();
  if (cc == 0) return cuda_failure("querying the current device");
  return cc >= minimum ? Status::Ok() : capability_error(cc, who, "", minimum);
}

Status require_exact_compute_capability(int wanted, const char* who) {
  const int cc = compute_capability();
  if (cc == 0) return cuda_failure("querying the current device");
  return cc == wanted ? Status::Ok() : capability_error(cc, who, "exactly ", wanted);
}

Status make_device_current() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess)
    return cuda_failure("making the current device's context current");
  return Status::Ok();
}

Status persistent_grid(int ctas_per_sm, int64_t max_tiles, int* num_ctas) {
  const int sms = multiprocessor_count();
  if (sms == 0 || ctas_per_sm == 0) return cuda_failure("configuring the kernel");
  int64_t ctas = std::min<int64_t>(max_tiles, int64_t{sms} * ctas_per_sm);
  const int cap = grid_cap_for_testing.load(std::memory_order_relaxed);
  if (cap > 0) ctas = std::min<int64_t>(ctas, cap);
  *num_ctas = static_cast<int>(ctas);
  return Status::Ok();
}

void set_persistent_grid_cap_for_testing(int max_ctas) {
  grid_cap_for_testing.store(std::max(0, max_ctas), std::memory_order_relaxed);
}

void set_memory_peak_for_testing(int gbps) {
  memory_peak_for_testing.store(std::max(0, gbps), std::memory_order_relaxed);
}

}  // namespace blockattn::core
