// sm_90a forward kernels for bf16, head dims 64 and 128.
#include "common/kernel_launcher.cuh"
#include "hopper/forward_kernel.cuh"

namespace blockattn::hopper {

template <int D>
using bf16_launcher =
    KernelLauncher<ForwardParams, forward_kernel<__nv_bfloat16, D>, ForwardConfig<__nv_bfloat16, D>::kThreads,
                   ForwardConfig<__nv_bfloat16, D>::kSmemBytes>;

template <>
int forward_ctas_per_sm<__nv_bfloat16, 64>() {
  return bf16_launcher<64>::ctas_per_sm();
}
template <>
int forward_ctas_per_sm<__nv_bfloat16, 128>() {
  return bf16_launcher<128>::ctas_per_sm();
}
template <>
cudaError_t launch_forward<__nv_bfloat16, 64>(const ForwardParams& p, int n, cudaStream_t s) {
  return bf16_launcher<64>::launch(p, n, s);
}
template <>
cudaError_t launch_forward<__nv_bfloat16, 128>(const ForwardParams& p, int n, cudaStream_t s) {
  return bf16_launcher<128>::launch(p, n, s);
}

}  // namespace blockattn::hopper
