// Portable forward kernels for fp16, head dims 64 and 128.
#include "portable/forward_kernel.cuh"
#include "common/instantiate.cuh"

namespace blockattn::portable {
BLOCKATTN_INSTANTIATE(forward, KernelParams, ForwardConfig, __half, 64)
BLOCKATTN_INSTANTIATE(forward, KernelParams, ForwardConfig, __half, 128)
}  // namespace blockattn::portable
