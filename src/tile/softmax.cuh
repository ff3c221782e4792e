// Exact (single-pass) softmax over the keys of one block, and the backward's
// dS step, on fp32 accumulator rows. Every query row meets all of its keys in
// one tile, so there is no running max, no rescaling and no logsumexp.
#pragma once

#include <cmath>

#include "tile/fragments.cuh"

namespace blockattn::tile {

// In place: s <- exp2(scale_log2 * s - rowmax), with key columns at or past
// valid_cols set to exactly 0 (selected, never multiplied, so inf/NaN cannot
// leak from masked columns). Returns each of the thread's two rows' sums.
template <int kN>
__device__ __forceinline__ void exp_rows_masked(Accumulator<kN>& s, int valid_cols, float scale_log2,
                                                float (&row_sum)[2], int lane) {
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s.c[j][e] = fragment_col(j, e, lane) < valid_cols ? s.c[j][e] * scale_log2 : -INFINITY;
      row_max[e >> 1] = fmaxf(row_max[e >> 1], s.c[j][e]);
    }
  row_max[0] = quad_max(row_max[0]);
  row_max[1] = quad_max(row_max[1]);
  row_sum[0] = row_sum[1] = 0.f;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s.c[j][e] = fragment_col(j, e, lane) < valid_cols ? exp2f(s.c[j][e] - row_max[e >> 1]) : 0.f;
      row_sum[e >> 1] += s.c[j][e];
    }
  row_sum[0] = quad_sum(row_sum[0]);
  row_sum[1] = quad_sum(row_sum[1]);
}

// 1 / row_sum for the forward's normalization (row_sum >= 1 for every row:
// its max term is exp2(0)).
__device__ __forceinline__ RowScale inverse(const float (&row_sum)[2]) {
  return {{1.f / row_sum[0], 1.f / row_sum[1]}};
}

// The backward's normalization of P for the warp's rows row0.. of a tile:
// 1 / row_sum, and 0 for rows at or past valid_rows (they must add nothing to
// dK and dV).
__device__ __forceinline__ RowScale inverse_valid_rows(const float (&row_sum)[2], int row0, int valid_rows, int lane) {
  return {{row0 + lane / 4 < valid_rows ? 1.f / row_sum[0] : 0.f,
           row0 + lane / 4 + 8 < valid_rows ? 1.f / row_sum[1] : 0.f}};
}

// The backward's softmax step, in place:
//   p  <- P = p * inv (inv from inverse_valid_rows);
//   dp <- dS = P * (dP - sum_j P_j dP_j).
// `p` comes from exp_rows_masked, `dp` is dO V^T.
template <int kN>
__device__ __forceinline__ void softmax_grad_rows(Accumulator<kN>& p, Accumulator<kN>& dp, const RowScale& inverse) {
  const float(&inv)[2] = inverse.row;
  float dot[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      p.c[j][e] *= inv[e >> 1];
      dot[e >> 1] += p.c[j][e] * dp.c[j][e];
    }
  dot[0] = quad_sum(dot[0]);
  dot[1] = quad_sum(dot[1]);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dp.c[j][e] = p.c[j][e] * (dp.c[j][e] - dot[e >> 1]);
}

}  // namespace blockattn::tile
