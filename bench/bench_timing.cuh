// What the benchmark programs share: device-side random fill, a median
// timer over CUDA events, and the same-run copy bandwidth.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "support/device_buffer.h"

namespace blockattn::bench {

using testing::DeviceBuffer;
using bf16 = __nv_bfloat16;

// Deterministic pseudo-random N(0,1)-ish values (sum of 4 uniforms, centred
// and scaled), generated on the device: the headline tensors are ~1.7 GB each.
template <typename T>
__global__ void fill_random(T* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    float s = 0.f;
    for (int r = 0; r < 4; ++r) {
      h ^= h >> 31;
      h *= 0xBF58476D1CE4E5B9ull;
      h ^= h >> 29;
      s += static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
    }
    x[i] = T((s - 2.f) * 1.7320508f);  // bf16 or fp16, from float
  }
}

template <typename T>
void randomize(DeviceBuffer<T>& b, uint64_t seed) {
  fill_random<<<1024, 256>>>(b.get(), b.count(), seed);
  BA_CHECK_CUDA(cudaGetLastError());
}

template <typename F>
double median_ms(F&& launch, int reps) {
  cudaEvent_t start, stop;
  BA_CHECK_CUDA(cudaEventCreate(&start));
  BA_CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i)
    launch();  // warm-up
  std::vector<float> ms(reps);
  for (auto& t : ms) {
    BA_CHECK_CUDA(cudaEventRecord(start));
    launch();
    BA_CHECK_CUDA(cudaEventRecord(stop));
    BA_CHECK_CUDA(cudaEventSynchronize(stop));
    BA_CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
  }
  BA_CHECK_CUDA(cudaEventDestroy(start));
  BA_CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Device-to-device copy bandwidth, counting bytes read plus bytes written.
inline double copy_bandwidth_tbs(int reps) {
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer<unsigned char> a(bytes), b(bytes);
  BA_CHECK_CUDA(cudaMemset(a.get(), 1, bytes));
  const double ms =
      median_ms([&] { BA_CHECK_CUDA(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice)); }, reps);
  return 2.0 * bytes / (ms * 1e-3) / 1e12;
}

}  // namespace blockattn::bench
