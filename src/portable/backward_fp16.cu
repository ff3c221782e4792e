// Portable backward kernels for fp16, head dims 64 and 128.
#include "portable/backward_kernel.cuh"
#include "common/instantiate.cuh"

namespace blockattn::portable {
BLOCKATTN_INSTANTIATE(backward, KernelParams, BackwardConfig, __half, 64)
BLOCKATTN_INSTANTIATE(backward, KernelParams, BackwardConfig, __half, 128)
}  // namespace blockattn::portable
