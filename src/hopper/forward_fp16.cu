// sm_90a forward kernels for fp16, head dims 64 and 128.
#include "common/kernel_launcher.cuh"
#include "hopper/forward_kernel.cuh"

namespace blockattn::hopper {

template <int D>
using fp16_launcher = KernelLauncher<ForwardParams, forward_kernel<__half, D>, ForwardConfig<__half, D>::kThreads,
                                     ForwardConfig<__half, D>::kSmemBytes>;

template <>
int forward_ctas_per_sm<__half, 64>() {
  return fp16_launcher<64>::ctas_per_sm();
}
template <>
int forward_ctas_per_sm<__half, 128>() {
  return fp16_launcher<128>::ctas_per_sm();
}
template <>
cudaError_t launch_forward<__half, 64>(const ForwardParams& p, int n, cudaStream_t s) {
  return fp16_launcher<64>::launch(p, n, s);
}
template <>
cudaError_t launch_forward<__half, 128>(const ForwardParams& p, int n, cudaStream_t s) {
  return fp16_launcher<128>::launch(p, n, s);
}

}  // namespace blockattn::hopper
