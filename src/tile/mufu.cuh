// 2^x and 1 / x as the one MUFU instruction each is, for every softmax of the
// library. No CUDA header exposes either instruction alone.
#pragma once

namespace blockattn::tile {

// ex2.approx.ftz: exp2f without --use_fast_math wraps the same instruction in
// range and denormal handling, four instructions per score where softmax
// tiles are bound by instruction issue (docs/perf.md, "Dense forward", step 7,
// and "Block softmax"); results below 2^-126 add nothing to a softmax sum that
// is at least 1.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// rcp.approx.ftz: __fdividef(1.f, x) is the same MUFU.RCP wrapped in a
// denormal test, a select and a predicate merge per call (the grouped
// backward's two row sums a head; docs/perf.md, "Session 48"). For the
// softmax's row sums, which lie in [1, 2^100) (softmax.cuh), the two agree.
__device__ __forceinline__ float fast_reciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace blockattn::tile
