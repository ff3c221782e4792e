// Explicit instantiation of a portable kernel's host entry points (declared in
// kernel_params.h) for one dtype and head dim; one .cu file per direction and
// dtype keeps compile units small and parallel.
#pragma once

#include "common/kernel_launcher.cuh"

#define BLOCKATTN_INSTANTIATE(direction, Config, T, D)                                        \
  template <>                                                                                 \
  int direction##_ctas_per_sm<T, D>() {                                                       \
    return KernelLauncher<KernelParams, direction##_kernel<T, D>, Config<T, D>::kThreads,     \
                          Config<T, D>::kSmemBytes>::ctas_per_sm();                           \
  }                                                                                           \
  template <>                                                                                 \
  cudaError_t launch_##direction<T, D>(const KernelParams& p, int num_ctas, cudaStream_t s) { \
    return KernelLauncher<KernelParams, direction##_kernel<T, D>, Config<T, D>::kThreads,     \
                          Config<T, D>::kSmemBytes>::launch(p, num_ctas, s);                  \
  }
