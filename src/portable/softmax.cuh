// Exact (single-pass) softmax over the 64 keys of a block, on the fp32
// accumulator rows of S = Q K^T. Every query row meets all of its keys in one
// tile, so there is no running max and no rescaling.
#pragma once

#include <cmath>

#include "portable/warp_gemm.cuh"

namespace blockattn::portable {

// In place: s <- exp2(scale_log2 * s - rowmax), with key columns at or past
// valid_cols set to exactly 0 (selected, never multiplied, so inf/NaN cannot
// leak from masked columns). Returns each of the thread's two rows' sums in
// row_sum[0] (row lane/4) and row_sum[1] (row lane/4 + 8).
template <int kN>
__device__ __forceinline__ void exp_rows_masked(Accumulator<kN>& s, int valid_cols, float scale_log2,
                                                float (&row_sum)[2], int lane) {
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * j + 2 * (lane % 4) + (e & 1);
      s.c[j][e] = col < valid_cols ? s.c[j][e] * scale_log2 : -INFINITY;
      row_max[e >> 1] = fmaxf(row_max[e >> 1], s.c[j][e]);
    }
  row_max[0] = quad_max(row_max[0]);
  row_max[1] = quad_max(row_max[1]);
  row_sum[0] = row_sum[1] = 0.f;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * j + 2 * (lane % 4) + (e & 1);
      s.c[j][e] = col < valid_cols ? exp2f(s.c[j][e] - row_max[e >> 1]) : 0.f;
      row_sum[e >> 1] += s.c[j][e];
    }
  row_sum[0] = quad_sum(row_sum[0]);
  row_sum[1] = quad_sum(row_sum[1]);
}

}  // namespace blockattn::portable
