// Online softmax over a sequence of key tiles (the dense forward), on the
// fp32 accumulator rows of tile/fragments.cuh: a running row max and row sum,
// the factor that rescales the output accumulated so far, masking of the
// tiles that cross the causal diagonal or the sequence end, and the final
// normalization and logsumexp. Architecture-neutral: the sm80 (mma.sync) and
// sm90 (wgmma) dense kernels share it, as each warp of a warpgroup holds its
// 16 rows of a wgmma accumulator in the mma.sync layout.
//
// Scores stay unscaled in the accumulator; the softmax scale and log2(e) are
// folded into one FFMA before each exp2: p = exp2(s * scale_log2 - max * scale_log2).
// That needs scale_log2 > 0 (the API requires a positive scale), so that the
// max of the raw scores is the max of the scaled ones.
#pragma once

#include <cmath>

#include "tile/mufu.cuh"
#include "tile/fragments.cuh"

namespace blockattn::tile {

// Sets the scores of a warp's two rows (this lane's) to -inf at key columns
// col0 + c >= limit[r]: keys past the sequence end and, under a causal mask,
// keys after the query (limit = query row + 1).
template <int kN>
__device__ __forceinline__ void mask_key_columns(Accumulator<kN>& s, int col0, const int (&limit)[2], int lane) {
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (col0 + fragment_col(j, e, lane) >= limit[e >> 1]) s.c[j][e] = -INFINITY;
}

// The key-column limits of this lane's two rows (query rows row0 + lane / 4
// and + 8, absolute): every key < seq_len, and under a causal mask none after
// the query itself.
__device__ __forceinline__ void key_limits(int row0, int seq_len, bool causal, int lane, int (&limit)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + lane / 4 + 8 * r;
    limit[r] = causal ? min(row + 1, seq_len) : seq_len;
  }
}

// The running state of a lane's two rows.
struct OnlineSoftmax {
  float row_max[2];  // of the raw scores seen so far (-inf before any unmasked key)
  float row_sum[2];  // this lane's share of sum_j exp2((s_j - row_max) * scale_log2); quad-reduced in finish()

  __device__ __forceinline__ void init() {
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
  }

  // One key tile: s (raw scores, masked entries -inf) becomes P =
  // exp2((s - new max) * scale_log2) in place. Returns the factor each row of
  // the output accumulated over earlier tiles must be multiplied by.
  template <int kN>
  __device__ __forceinline__ RowScale update(Accumulator<kN>& s, float scale_log2) {
    float new_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        new_max[e >> 1] = fmaxf(new_max[e >> 1], s.c[j][e]);
    RowScale rescale;
    float max_scaled[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      new_max[r] = quad_max(new_max[r]);
      // A row whose keys have all been masked so far keeps max -inf; using 0
      // there makes its p exactly 0 instead of exp2(-inf + inf) = NaN.
      max_scaled[r] = new_max[r] == -INFINITY ? 0.f : new_max[r] * scale_log2;
      rescale.row[r] = fast_exp2(row_max[r] * scale_log2 - max_scaled[r]);  // 0 when row_max was -inf
      row_max[r] = new_max[r];
      row_sum[r] *= rescale.row[r];
    }
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s.c[j][e] = fast_exp2(fmaf(s.c[j][e], scale_log2, -max_scaled[e >> 1]));
        row_sum[e >> 1] += s.c[j][e];
      }
    return rescale;
  }

  // After the last tile: the factor that normalizes each output row (1 / row
  // sum), and each row's logsumexp in natural-log units. Every valid query
  // row has at least one unmasked key, so its sum is >= 1.
  __device__ __forceinline__ RowScale finish(float scale_log2, float (&lse)[2]) {
    RowScale inverse;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(row_sum[r]);
      inverse.row[r] = 1.f / sum;
      lse[r] = (row_max[r] * scale_log2 + log2f(sum)) * 0.69314718055994531f;
    }
    return inverse;
  }
};

// acc *= per-row factors (the rescale of update()).
template <int kN>
__device__ __forceinline__ void scale_rows(Accumulator<kN>& acc, const RowScale& f) {
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc.c[j][e] *= f.row[e >> 1];
}

}  // namespace blockattn::tile
