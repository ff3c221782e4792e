// One cuBLASLt matmul in its own column-major terms, for the layer's three
// GEMMs (a row-major [r, c] matrix is a column-major [c, r] one).
#pragma once

#include <cstdint>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"

namespace blockattn::layer {

// D [m, n] = op(A) op(B), op(A) [m, k], op(B) [k, n]; leading dimensions are
// those of the stored matrices. `vector` is the bias (an input, kBias) or the
// bias gradient (an output, kBiasGradB: the sum of op(B) over k).
struct Matmul {
  enum class Epilogue { kNone, kBias, kBiasGradB };
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  Epilogue epilogue = Epilogue::kNone;
  void* vector = nullptr;
};

// Runs `mm` on `stream` with fp32 accumulation; `workspace` is cuBLASLt's.
Status run_matmul(const Matmul& mm, DType dtype, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace blockattn::layer
