#include "support/late_copy.h"

namespace blockattn::testing {
namespace {

struct LateCopies {
  LateCopy copy[kMaxLateCopies];
  int count;
};

__global__ void late_copy_kernel(const LateCopies copies, long long delay_cycles) {
  // clock64 counts SM cycles; at most 2 GHz, so delay_cycles covers the delay.
  const long long start = clock64();
  while (clock64() - start < delay_cycles) {
  }
  const size_t first = blockIdx.x * size_t{blockDim.x} + threadIdx.x, stride = gridDim.x * size_t{blockDim.x};
  for (int c = 0; c < copies.count; ++c) {
    const auto* from = static_cast<const unsigned char*>(copies.copy[c].from);
    auto* to = static_cast<unsigned char*>(copies.copy[c].to);
    for (size_t i = first; i < copies.copy[c].bytes; i += stride)
      to[i] = from[i];
  }
}

}  // namespace

cudaError_t enqueue_late_copies(const std::vector<LateCopy>& copies, int delay_us, cudaStream_t stream) {
  if (copies.size() > static_cast<size_t>(kMaxLateCopies)) return cudaErrorInvalidValue;
  LateCopies all{};
  for (size_t c = 0; c < copies.size(); ++c)
    all.copy[c] = copies[c];
  all.count = static_cast<int>(copies.size());
  late_copy_kernel<<<32, 256, 0, stream>>>(all, 2000LL * delay_us);
  return cudaGetLastError();
}

}  // namespace blockattn::testing
