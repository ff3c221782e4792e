// The dense forward's request as every layer below the public API reads it,
// the interface a backend offers for it, and the dense rows of the kernel
// table (src/kernel_table.cmake, BLOCKATTN_DENSE_KERNEL_TABLE).
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>

#include "blockattn/dense.h"

namespace blockattn::core {

struct DenseProblem : DenseForwardArgs {
  explicit DenseProblem(const DenseForwardArgs& a) : DenseForwardArgs(a) {}
  float resolved_scale() const;
  bool empty() const { return shape.batch == 0 || shape.seq_len == 0; }
};

class DenseKernelBackend {
 public:
  virtual ~DenseKernelBackend() = default;
  virtual Backend id() const = 0;
  // Ok when this backend can run the validated problem on the current device;
  // otherwise kUnsupported with the reason (kCudaError if the device could not
  // be queried). Launches nothing.
  virtual Status supports(const DenseProblem& p) const = 0;
  virtual Status launch(const DenseProblem& p, cudaStream_t stream) const = 0;
};

struct DenseKernelTable {
  const DenseKernelConfig* rows;
  size_t size;
  const DenseKernelConfig* begin() const { return rows; }
  const DenseKernelConfig* end() const { return rows + size; }
};

DenseKernelTable dense_kernel_table();
const DenseKernelConfig* find_dense_kernel(Backend backend, const DenseProblem& p);
bool any_dense_kernel_has_head_dim(int head_dim);
std::string built_dense_head_dims();

}  // namespace blockattn::core
