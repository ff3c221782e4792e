// Explicit instantiation of a kernel's host entry points (declared next to its
// Params type) for one dtype and head dim; one .cu file per path, direction and
// dtype keeps compile units small and parallel.
#pragma once

#include "common/kernel_launcher.cuh"

#define BLOCKATTN_INSTANTIATE(direction, Params, Config, T, D)                                                   \
  template <>                                                                                                  \
  int direction##_ctas_per_sm<T, D>() {                                                                        \
    return KernelLauncher<Params, direction##_kernel<T, D>, Config<T, D>::kThreads,                            \
                          Config<T, D>::kSmemBytes>::ctas_per_sm();                                            \
  }                                                                                                            \
  template <>                                                                                                  \
  cudaError_t launch_##direction<T, D>(const Params& p, int num_ctas, cudaStream_t s) {                        \
    return KernelLauncher<Params, direction##_kernel<T, D>, Config<T, D>::kThreads, Config<T, D>::kSmemBytes>:: \
        launch(p, num_ctas, s);                                                                                \
  }
