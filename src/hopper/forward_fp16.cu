// sm_90a forward kernels for fp16, head dims 64 and 128.
#include "common/instantiate.cuh"
#include "hopper/forward_kernel.cuh"

namespace blockattn::hopper {
BLOCKATTN_INSTANTIATE(forward, ForwardParams, ForwardConfig, __half, 64)
BLOCKATTN_INSTANTIATE(forward, ForwardParams, ForwardConfig, __half, 128)
}  // namespace blockattn::hopper
