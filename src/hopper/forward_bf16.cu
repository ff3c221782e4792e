// sm_90a forward kernels for bf16, head dims 64 and 128.
#include "common/instantiate.cuh"
#include "hopper/forward_kernel.cuh"

namespace blockattn::hopper {
BLOCKATTN_INSTANTIATE(forward, ForwardParams, ForwardConfig, __nv_bfloat16, 64)
BLOCKATTN_INSTANTIATE(forward, ForwardParams, ForwardConfig, __nv_bfloat16, 128)
}  // namespace blockattn::hopper
