// Arguments of the sm80 kernels and their host entry points (plain C++: the
// backend includes this from a .cpp file).
#pragma once

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "common/attention_params.h"

namespace blockattn::sm80 {

struct Params {
  TensorView q, k, v;
  TensorView out;               // forward
  TensorView dout, dq, dk, dv;  // backward
  AttentionParams attn;
};

// Defined in launch.cuh and instantiated for each table row by the generated
// sources: the launch on `num_ctas` persistent CTAs, and the resident CTAs per
// SM (an occupancy query that also raises the dynamic shared-memory limit once
// per device; 0 if the runtime refused the kernel's configuration).
template <Operation Op, typename T, int D, int B>
cudaError_t launch(const Params& p, int num_ctas, cudaStream_t stream);
template <Operation Op, typename T, int D, int B>
int ctas_per_sm();

}  // namespace blockattn::sm80
