// Definitions of the sm80 launch templates over KernelOf, the map from a table
// row to its kernel that forward_kernel.cuh and backward_kernel.cuh specialize.
#pragma once

#include "common/kernel_launcher.cuh"
#include "sm80/params.h"

namespace blockattn::sm80 {

template <Operation Op, typename T, int D, int B>
struct KernelOf;

template <Operation Op, typename T, int D, int B>
cudaError_t launch(const Params& p, int num_ctas, cudaStream_t stream) {
  return LauncherOf<KernelOf, Op, T, D, B>::launch(p, num_ctas, stream);
}

template <Operation Op, typename T, int D, int B>
int ctas_per_sm() {
  return LauncherOf<KernelOf, Op, T, D, B>::ctas_per_sm();
}

}  // namespace blockattn::sm80
