// Exact (single-pass) softmax over the keys of one block, and the backward's
// dS step, on fp32 accumulator rows. Every query row meets all of its keys in
// one tile, so there is no running max, no rescaling and no logsumexp.
#pragma once

#include <cmath>

#include "schedule/block_schedule.h"
#include "tile/fragments.cuh"
#include "tile/mufu.cuh"

namespace blockattn::tile {

// A row reduction over a thread's fragments in kChains partial chains per
// row (four: by the element's column parity and its fragment's; or one),
// joined at the end. With four, a 64-key row's 16-deep dependent chain of
// FMNMX, FADD or FFMA becomes four of depth 4 and two joins (128 keys: four
// of 8), which matters with two warps a scheduler (the grouped backward at
// D = 64 issued on 44% of its cycles; docs/perf.md, "Session 47"). The
// partials cost registers, though: six more a reduction, and the sm80
// backward at 32-token blocks, at the 255-register ceiling, keeps one chain
// (kSerialChains; its config's kSerialReductions says what four cost it).
// The chain count also sets the rounding order of row sums and dS's dot
// products.
constexpr int kParallelChains = 4, kSerialChains = 1;
template <int kChains = kParallelChains>
struct RowPartials {
  static_assert(kChains == kSerialChains || kChains == kParallelChains, "one or four chains a row");
  float part[2][kChains];
  __device__ __forceinline__ explicit RowPartials(float init) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int i = 0; i < kChains; ++i)
        part[r][i] = init;
  }
  // Element (j, e) of the accumulator: row e >> 1, chain ((e & 1) + 2 (j & 1)) % kChains.
  __device__ __forceinline__ float& of(int j, int e) { return part[e >> 1][((e & 1) + 2 * (j & 1)) % kChains]; }
  __device__ __forceinline__ void max_in(int j, int e, float x) { of(j, e) = fmaxf(of(j, e), x); }
  __device__ __forceinline__ void add_in(int j, int e, float x) { of(j, e) += x; }
  __device__ __forceinline__ void fma_in(int j, int e, float x, float y) { of(j, e) = fmaf(x, y, of(j, e)); }
  __device__ __forceinline__ float max(int r) const {
    if constexpr (kChains == 4) return fmaxf(fmaxf(part[r][0], part[r][1]), fmaxf(part[r][2], part[r][3]));
    return part[r][0];
  }
  __device__ __forceinline__ float sum(int r) const {
    if constexpr (kChains == 4) return (part[r][0] + part[r][1]) + (part[r][2] + part[r][3]);
    return part[r][0];
  }
};

// Which key columns a thread's two rows (lane / 4 and lane / 4 + 8 of its
// 16) may see: the first valid_cols (a block), or for each row its own range
// [lo, lo + width) (a packed tile, one unsigned compare per column).
struct FirstKeys {
  int valid_cols;
  __device__ __forceinline__ bool outside(int col, int /*row*/) const { return col >= valid_cols; }
};
struct KeyRanges {
  int lo[2], width[2];
  __device__ __forceinline__ bool outside(int col, int row) const {
    return static_cast<unsigned>(col - lo[row]) >= static_cast<unsigned>(width[row]);
  }
};

// What exp_rows subtracts from a row's scores before the exponentials.
// kRowMax: the row's max, found by a reduction (32 FMNMX and four shuffles a
// thread over a 64-key tile). kFirstKey: the row's first key's score, which
// the quad's first lane holds, broadcast by one shuffle a row. Any shift
// gives the same P in exact arithmetic; one at or below the max keeps the
// row sum at least 1, and the first key's score is at most the max. It only
// fails where the max lies so far above it that the sum passes
// kShiftedSumBound: exp_rows then says so, and the caller recomputes the
// tile with kRowMax (in the grouped backward, a warpgroup-wide choice,
// sm90/grouped_backward.cuh).
enum class RowShift { kRowMax, kFirstKey };

// Row sums up to this bound keep the approximate reciprocal exact (its input
// below 2^126) and every term finite; a first-key shift whose sum reaches it
// (the row's max 100 binary orders above its first key, or more) is redone.
constexpr float kShiftedSumBound = 0x1p100f;

// In place: s <- exp2(scale_log2 * (s - shift)) at the key columns each row
// may see, exactly 0 elsewhere (selected, never multiplied, so inf/NaN
// cannot leak from masked columns); kMasked = false when every column is
// valid for every row. Sets each of the thread's two rows' sums, and returns
// whether both are below kShiftedSumBound (always true for kRowMax, whose
// sums lie in [1, keys]).
//
// Scores arrive unscaled; the scale and log2(e) fold into one FFMA before
// each exponential, p = exp2(s * scale_log2 - shift * scale_log2). That needs
// scale_log2 > 0 (validation requires a positive softmax scale), so that the
// max of the raw scores is the max of the scaled ones.
template <int kN, bool kMasked, typename Keys, RowShift kShift = RowShift::kRowMax, int kChains = kParallelChains>
__device__ __forceinline__ bool exp_rows(Accumulator<kN>& s, const Keys& keys, float scale_log2, float (&row_sum)[2],
                                         int lane) {
  static_assert(kShift == RowShift::kRowMax || !kMasked, "the first key must be valid for every row");
  auto masked = [&](int j, int e) { return kMasked && keys.outside(fragment_col(j, e, lane), e >> 1); };
  float shift_scaled[2];
  if constexpr (kShift == RowShift::kFirstKey) {
    const int first_lane = lane & ~3;  // holds column 0 of both its rows: c[0][0] and c[0][2]
    shift_scaled[0] = __shfl_sync(0xffffffffu, s.c[0][0], first_lane) * scale_log2;
    shift_scaled[1] = __shfl_sync(0xffffffffu, s.c[0][2], first_lane) * scale_log2;
  } else {
    RowPartials<kChains> row_max(-INFINITY);
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        row_max.max_in(j, e, masked(j, e) ? -INFINITY : s.c[j][e]);
    shift_scaled[0] = quad_max(row_max.max(0)) * scale_log2;
    shift_scaled[1] = quad_max(row_max.max(1)) * scale_log2;
  }
  RowPartials<kChains> sums(0.f);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s.c[j][e] = masked(j, e) ? 0.f : fast_exp2(fmaf(s.c[j][e], scale_log2, -shift_scaled[e >> 1]));
      sums.add_in(j, e, s.c[j][e]);
    }
  row_sum[0] = quad_sum(sums.sum(0));
  row_sum[1] = quad_sum(sums.sum(1));
  // Written so that a NaN sum (from NaN inputs) fails too: the max's pass
  // then gives the same NaN.
  return kShift == RowShift::kRowMax || (row_sum[0] < kShiftedSumBound && row_sum[1] < kShiftedSumBound);
}

// exp_rows for a block whose first valid_cols key columns are real (the
// forward's tiles): the masks only where the block is shorter than the tile
// (a warp-uniform branch).
template <int kN>
__device__ __forceinline__ void exp_rows_masked(Accumulator<kN>& s, int valid_cols, float scale_log2,
                                                float (&row_sum)[2], int lane) {
  if (valid_cols >= kN)
    exp_rows<kN, false>(s, FirstKeys{valid_cols}, scale_log2, row_sum, lane);
  else
    exp_rows<kN, true>(s, FirstKeys{valid_cols}, scale_log2, row_sum, lane);
}

// exp_rows for the warp's rows row0.. of an entry of the tiles table (the
// backward's): every row sees its own segment's keys, i.e. the block's
// first row_count keys, or in a packed tile (several short sequences) its
// own sequence's. One masked variant serves partial and packed tiles alike:
// a third copy of the exponentials cost the sm80 backward 20-40 bytes more
// of spills. kShift applies to whole blocks (every row sees every key);
// partial and packed tiles take the row max. Returns exp_rows' verdict.
template <int kN, RowShift kShift = RowShift::kRowMax, int kChains = kParallelChains>
__device__ __forceinline__ bool exp_rows_in_tile(Accumulator<kN>& s, const schedule::BlockDesc& b, int row0,
                                                 float scale_log2, float (&row_sum)[2], int lane) {
  if (b.segment_starts == 1 && b.row_count >= kN)
    return exp_rows<kN, false, FirstKeys, kShift, kChains>(s, FirstKeys{kN}, scale_log2, row_sum, lane);
  KeyRanges keys{{0, 0}, {b.row_count, b.row_count}};
  if (b.segment_starts != 1) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + lane / 4 + 8 * h;  // < kN <= 64: packed tiles have at most 64 rows
      keys.lo[h] = schedule::segment_first_row(b.segment_starts, row);
      keys.width[h] = schedule::segment_end_row(b.segment_starts, row, b.row_count) - keys.lo[h];
    }
  }
  return exp_rows<kN, true, KeyRanges, RowShift::kRowMax, kChains>(s, keys, scale_log2, row_sum, lane);
}

// How 1 / row_sum is taken. row_sum lies in [1, keys] (its max term is
// exp2(0)), or in [1, kShiftedSumBound) after a first-key shift: far from
// where the approximate reciprocal (MUFU.RCP, 1 ulp at most; mufu.cuh)
// differs from IEEE's, whose `1.f / x` adds a test and a branch to a slow
// path per row (3.5% of the grouped backward's samples at D = 64,
// docs/perf.md, "Session 47"). kIeee stays for the sm80 backward at
// D = 128, where ptxas, at the 255-register ceiling, spilled 28 bytes more
// with the approximate one (then `__fdividef`), and at 32-token blocks
// (its config's kSerialReductions).
enum class Reciprocal { kApprox, kIeee };
template <Reciprocal kR = Reciprocal::kApprox>
__device__ __forceinline__ float reciprocal_of_sum(float row_sum) {
  return kR == Reciprocal::kApprox ? fast_reciprocal(row_sum) : 1.f / row_sum;
}

// 1 / row_sum for the forward's normalization.
__device__ __forceinline__ RowScale inverse(const float (&row_sum)[2]) {
  return {{reciprocal_of_sum(row_sum[0]), reciprocal_of_sum(row_sum[1])}};
}

// The backward's normalization of P for the warp's rows row0.. of a tile:
// 1 / row_sum, and 0 for rows at or past valid_rows (they must add nothing to
// dK and dV).
template <Reciprocal kR = Reciprocal::kApprox>
__device__ __forceinline__ RowScale inverse_valid_rows(const float (&row_sum)[2], int row0, int valid_rows, int lane) {
  return {{row0 + lane / 4 < valid_rows ? reciprocal_of_sum<kR>(row_sum[0]) : 0.f,
           row0 + lane / 4 + 8 < valid_rows ? reciprocal_of_sum<kR>(row_sum[1]) : 0.f}};
}

// The backward's softmax step, in place:
//   p  <- P = p * inv (inv from inverse_valid_rows);
//   dp <- dS = P * (dP - sum_j P_j dP_j), times ds_scale.
// `p` comes from exp_rows_masked, `dp` is dO V^T. A ds_scale of the softmax
// scale gives dQ = dS K and dK = dS^T Q already scaled, for the cost of an
// FFMA where the unscaled step has an FADD (1 folds away).
template <int kN, int kChains = kParallelChains>
__device__ __forceinline__ void softmax_grad_rows(Accumulator<kN>& p, Accumulator<kN>& dp, const RowScale& inverse,
                                                  float ds_scale = 1.f) {
  const float(&inv)[2] = inverse.row;
  RowPartials<kChains> dots(0.f);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      p.c[j][e] *= inv[e >> 1];
      dots.fma_in(j, e, p.c[j][e], dp.c[j][e]);
    }
  const float scaled_dot[2] = {ds_scale * quad_sum(dots.sum(0)), ds_scale * quad_sum(dots.sum(1))};
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dp.c[j][e] = p.c[j][e] * fmaf(dp.c[j][e], ds_scale, -scaled_dot[e >> 1]);
}

}  // namespace blockattn::tile
