// Portable forward kernels for bf16, head dims 64 and 128.
#include "portable/forward_kernel.cuh"
#include "common/instantiate.cuh"

namespace blockattn::portable {
BLOCKATTN_INSTANTIATE(forward, KernelParams, ForwardConfig, __nv_bfloat16, 64)
BLOCKATTN_INSTANTIATE(forward, KernelParams, ForwardConfig, __nv_bfloat16, 128)
}  // namespace blockattn::portable
