// sm_90a backward kernels for bf16, head dims 64 and 128.
#include "common/instantiate.cuh"
#include "hopper/backward_kernel.cuh"

namespace blockattn::hopper {
BLOCKATTN_INSTANTIATE(backward, BackwardParams, BackwardConfig, __nv_bfloat16, 64)
BLOCKATTN_INSTANTIATE(backward, BackwardParams, BackwardConfig, __nv_bfloat16, 128)
}  // namespace blockattn::hopper
