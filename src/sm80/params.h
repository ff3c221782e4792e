// Arguments of the sm80 kernels (plain C++: the backend includes this from a
// .cpp file).
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

}  // namespace blockattn::sm80
