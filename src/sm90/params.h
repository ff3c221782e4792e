// Arguments of the sm90 kernels and their host entry points (plain C++: the
// backend includes this from a .cpp file).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "common/attention_params.h"

namespace blockattn::sm90 {

struct Params {
  // TMA maps of the inputs (64-byte aligned by their type); dout_map only in
  // the backward.
  CUtensorMap q_map, k_map, v_map, dout_map;
  // Outputs, written with plain 16-byte stores, never past a block's end.
  TensorView out;         // forward
  TensorView dq, dk, dv;  // backward
  AttentionParams attn;
};

// Defined in launch.cuh and instantiated for each table row by the generated
// sources (see sm80/params.h for the contract).
template <Operation Op, typename T, int D, int B>
cudaError_t launch(const Params& p, int num_ctas, cudaStream_t stream);
template <Operation Op, typename T, int D, int B>
int ctas_per_sm();

}  // namespace blockattn::sm90
