// sm_90a backward kernels for fp16, head dims 64 and 128.
#include "common/instantiate.cuh"
#include "hopper/backward_kernel.cuh"

namespace blockattn::hopper {
BLOCKATTN_INSTANTIATE(backward, BackwardParams, BackwardConfig, __half, 64)
BLOCKATTN_INSTANTIATE(backward, BackwardParams, BackwardConfig, __half, 128)
}  // namespace blockattn::hopper
