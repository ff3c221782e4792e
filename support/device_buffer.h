// Minimal RAII device memory and CUDA error checking for tests and benchmarks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace blockattn::testing {

#define BA_CHECK_CUDA(expr)                                                                                \
  do {                                                                                                     \
    const cudaError_t err_ = (expr);                                                                       \
    if (err_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::abort();                                                                                        \
    }                                                                                                      \
  } while (0)

// Why GPU work cannot run here, or "" when a CUDA device is usable.
inline std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorString(err) + ")";
  if (n == 0) return "no CUDA device";
  return "";
}

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    BA_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&data_), bytes() > 0 ? bytes() : 16));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    BA_CHECK_CUDA(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    BA_CHECK_CUDA(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  // Every byte 0xFF: NaN as bf16 and as fp16, so unwritten elements show.
  void poison() { BA_CHECK_CUDA(cudaMemset(data_, 0xFF, bytes())); }

 private:
  T* data_ = nullptr;
  size_t count_;
};

}  // namespace blockattn::testing
