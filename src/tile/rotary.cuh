// Rotary embeddings fused into the tile operations (blockattn::Rotary), as a
// hook set (tile/hooks.cuh):
//   prologue  rotates the rows of the Q, K (and V) tiles in shared memory,
//             in fp32 with one rounding, once they have landed. Q, K and V of a
//             tile are the same tokens, so each table value is loaded once and
//             applied to all three.
//   epilogue  applies the transpose rotation to the fp32 dQ, dK (and dV)
//             accumulators before their single rounding. A thread holds both
//             halves of a pair: (2j, 2j + 1) are adjacent columns of one
//             fragment; (j, j + r/2) are fragments r/16 apart (r/2 a multiple
//             of 8, checked on the host), which needs whole rows (kWholeRows).
// Angles: row `pos` of the cos and sin tables, pos = the token's row, or its
// index within its sequence plus seq_start[seq]; a position outside the table
// is the identity and reads nothing.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/attention_params.h"
#include "tile/fragments.cuh"
#include "tile/output_kind.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::tile {

// Calls f(std::integral_constant<int, S>) for the S in [1, kMax] equal to
// `value` (none if there is none): a run-time shift made a compile-time one,
// so that register fragments are never indexed at run time.
template <int kMax, typename F>
__device__ __forceinline__ void with_static_shift(int value, F&& f) {
  if constexpr (kMax >= 1) {
    if (value == kMax)
      f(std::integral_constant<int, kMax>{});
    else
      with_static_shift<kMax - 1>(value, f);
  }
}

// Eight 16-bit values of one 16-byte shared-memory unit, as fp32 and back.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& u, float (&x)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
    unpack2<T>(w[i], x[2 * i], x[2 * i + 1]);
}
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  return make_uint4(pack2<T>(x[0], x[1]), pack2<T>(x[2], x[3]), pack2<T>(x[4], x[5]), pack2<T>(x[6], x[7]));
}

class RotaryHooks {
 public:
  static constexpr bool kModifiesOperands = true;
  static constexpr bool kWholeRows = true;

  __device__ explicit RotaryHooks(const AttentionParams& p) : p_(p) {}

  template <typename Layout, int kRows, int D, int kThreads, typename T>
  __device__ __forceinline__ void prologue(const TileCoords& t, int tid, T* q, T* k, T* v) const {
    const RotaryParams& r = p_.rotary;
    T* const tiles[3] = {q, k, r.rotate_v ? v : nullptr};
    const int64_t first = first_position(t);
    const int valid = t.block.row_count;
    // One job per (row, 16-byte unit of the rotated channels): half-split
    // units pair with the unit r/2 columns on; interleaved units hold 4 pairs.
    const int units = r.half_split ? r.half / 8 : (2 * r.half + 7) / 8;
    for (int job = tid; job < valid * units; job += kThreads) {
      const int row = job / units, col = (job - row * units) * 8;
      const int64_t pos = first + row;
      if (!in_table(pos)) continue;
      if (r.half_split) {
        float c[8], s[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          c[i] = cos_at(pos, col + i);
          s[i] = sin_at(pos, col + i);
        }
#pragma unroll
        for (T* tile : tiles)
          if (tile != nullptr) rotate_half_units<Layout>(tile, row, col, r.half, c, s);
      } else {
        float c[4], s[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // pairs past r/2 pass through (angle 0)
          const int j = col / 2 + i;
          c[i] = j < r.half ? cos_at(pos, j) : 1.f;
          s[i] = j < r.half ? sin_at(pos, j) : 0.f;
        }
#pragma unroll
        for (T* tile : tiles)
          if (tile != nullptr) rotate_interleaved_unit<Layout>(tile, row, col, c, s);
      }
    }
  }

  // Transpose rotation of a gradient's whole rows (col0 == 0, kN == D); the
  // forward output (kOut) stays in the frame of the rotated v.
  template <int kN>
  __device__ __forceinline__ void epilogue(Output o, Accumulator<kN>& acc, const TileCoords& t, int rows_begin,
                                           int /*col0*/, int lane) const {
    const RotaryParams& r = p_.rotary;
    if (o == Output::kOut || (o == Output::kDv && !r.rotate_v)) return;
    const int64_t first = first_position(t);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the thread's rows lane/4 and lane/4 + 8
      const int row = rows_begin + lane / 4 + 8 * h;
      const int64_t pos = first + row;
      if (row >= t.block.row_count || !in_table(pos)) continue;
      if (r.half_split) {
        with_static_shift<kN / 16>(r.half / 8, [&](auto shift) {
#pragma unroll
          for (int j = 0; j < kN / 8 - shift; ++j)
            if (j < shift)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int pair = fragment_col(j, e, lane);
                rotate_back(acc.c[j][2 * h + e], acc.c[j + shift][2 * h + e], cos_at(pos, pair), sin_at(pos, pair));
              }
        });
      } else {
#pragma unroll
        for (int j = 0; j < kN / 8; ++j) {
          const int pair = fragment_col(j, 0, lane) / 2;
          if (pair < r.half) rotate_back(acc.c[j][2 * h], acc.c[j][2 * h + 1], cos_at(pos, pair), sin_at(pos, pair));
        }
      }
    }
  }

 private:
  const AttentionParams& p_;

  // Table row of the tile's first token (later rows follow it one by one).
  __device__ __forceinline__ int64_t first_position(const TileCoords& t) const {
    const RotaryParams& r = p_.rotary;
    if (!r.in_sequence) return t.block.row_begin;
    const schedule::BlockSeq at = p_.schedule.block_seqs[t.block_index];
    return static_cast<int64_t>(at.first_pos) + (r.seq_start != nullptr ? r.seq_start[at.seq] : 0);
  }
  __device__ __forceinline__ bool in_table(int64_t pos) const {
    return pos >= 0 && pos < p_.rotary.num_positions;
  }

  __device__ __forceinline__ float table_at(const void* table, int64_t index) const {
    switch (p_.rotary.table_type) {
      case TableType::kBF16:
        return __bfloat162float(static_cast<const __nv_bfloat16*>(table)[index]);
      case TableType::kFP16:
        return __half2float(static_cast<const __half*>(table)[index]);
      default:
        return static_cast<const float*>(table)[index];
    }
  }
  __device__ __forceinline__ float cos_at(int64_t pos, int pair) const {
    return table_at(p_.rotary.cos, pos * p_.rotary.cos_row_stride + pair);
  }
  __device__ __forceinline__ float sin_at(int64_t pos, int pair) const {
    return table_at(p_.rotary.sin, pos * p_.rotary.sin_row_stride + pair);
  }

  // y = R^T x for one pair.
  __device__ __forceinline__ static void rotate_back(float& a, float& b, float c, float s) {
    const float xa = a, xb = b;
    a = xa * c + xb * s;
    b = xb * c - xa * s;
  }

  // Pairs (col + i, col + half + i), i < 8, of one row.
  template <typename Layout, typename T>
  __device__ __forceinline__ static void rotate_half_units(T* tile, int row, int col, int half, const float (&c)[8],
                                                           const float (&s)[8]) {
    uint4* lo_unit = reinterpret_cast<uint4*>(tile + Layout::offset(row, col));
    uint4* hi_unit = reinterpret_cast<uint4*>(tile + Layout::offset(row, col + half));
    float a[8], b[8];
    unpack8<T>(*lo_unit, a);
    unpack8<T>(*hi_unit, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float xa = a[i], xb = b[i];
      a[i] = xa * c[i] - xb * s[i];
      b[i] = xb * c[i] + xa * s[i];
    }
    *lo_unit = pack8<T>(a);
    *hi_unit = pack8<T>(b);
  }

  // Pairs (col + 2i, col + 2i + 1), i < 4, of one row.
  template <typename Layout, typename T>
  __device__ __forceinline__ static void rotate_interleaved_unit(T* tile, int row, int col, const float (&c)[4],
                                                                 const float (&s)[4]) {
    uint4* unit = reinterpret_cast<uint4*>(tile + Layout::offset(row, col));
    float x[8];
    unpack8<T>(*unit, x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float xa = x[2 * i], xb = x[2 * i + 1];
      x[2 * i] = xa * c[i] - xb * s[i];
      x[2 * i + 1] = xb * c[i] + xa * s[i];
    }
    *unit = pack8<T>(x);
  }
};

}  // namespace blockattn::tile
