#include "api/device_info.h"

namespace blockattn {
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

}  // namespace blockattn
