// 2^x as the one MUFU instruction it is, for every softmax of the library.
#pragma once

namespace blockattn::tile {

// ex2.approx.ftz: exp2f without --use_fast_math wraps the same instruction in
// range and denormal handling, four instructions per score where softmax
// tiles are bound by instruction issue (docs/perf.md, "Dense forward", step 7,
// and "Block softmax"); results below 2^-126 add nothing to a softmax sum that
// is at least 1. No CUDA header exposes the instruction.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace blockattn::tile
