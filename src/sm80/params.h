// Arguments of the sm80 kernels (plain C++: the backend includes this from a
// .cpp file).
#pragma once

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "blockattn/dense.h"
#include "common/attention_params.h"
#include "common/dense_params.h"

namespace blockattn::sm80 {

struct Params {
  TensorView q, k, v;
  TensorView out;               // forward
  TensorView dout, dq, dk, dv;  // backward
  AttentionParams attn;
};

// The dense forward's: a work unit is kDenseRowsPerUnit query rows (16 per warp).
inline constexpr int kDenseRowsPerUnit = 64;
struct DenseParams {
  DenseTensorView q, k, v, out;
  DenseAttnParams attn;
};

}  // namespace blockattn::sm80
