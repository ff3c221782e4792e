// Arguments of the sm90 kernels (plain C++: the backend includes this from a
// .cpp file).
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

}  // namespace blockattn::sm90
