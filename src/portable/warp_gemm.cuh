// Warp-level 16-row matrix products over swizzled shared-memory tiles: the three
// shapes attention needs, named by where the operands live and whether the
// shared-memory operand is read as stored (N) or transposed (T).
//
//   gemm_abt  C += A B^T   A: 16 rows of a tile [16.., K]   B: tile [N, K]
//                          (S = Q K^T, dP = dO V^T)
//   gemm_rab  C += A B     A: registers (16 x K)            B: tile [K, N]
//                          (O = P V, dQ = dS K)
//   gemm_atb  C += A^T B   A: 16 columns of a tile [K, ..]  B: tile [K, N]
//                          (dV = P^T dO, dK = dS^T Q)
#pragma once

#include "portable/smem_tile.cuh"

namespace blockattn::portable {

// A 16 x kN fp32 accumulator: kN/8 mma C fragments.
template <int kN>
struct Accumulator {
  float c[kN / 8][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        c[j][e] = 0.f;
  }
  __device__ __forceinline__ void scale(float s) {
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        c[j][e] *= s;
  }
};

// A 16 x kK 16-bit operand in registers: kK/16 mma A fragments.
template <int kK>
struct OperandA {
  uint32_t a[kK / 16][4];
};

// An fp32 accumulator's C fragments have the A-fragment shape once adjacent
// column pairs are packed, so a product can feed the next one without a trip
// through shared memory.
template <typename T, int kN>
__device__ __forceinline__ OperandA<kN> to_operand(const Accumulator<kN>& acc) {
  OperandA<kN> op;
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk) {
    op.a[kk][0] = ElementTraits<T>::pack(acc.c[2 * kk][0], acc.c[2 * kk][1]);
    op.a[kk][1] = ElementTraits<T>::pack(acc.c[2 * kk][2], acc.c[2 * kk][3]);
    op.a[kk][2] = ElementTraits<T>::pack(acc.c[2 * kk + 1][0], acc.c[2 * kk + 1][1]);
    op.a[kk][3] = ElementTraits<T>::pack(acc.c[2 * kk + 1][2], acc.c[2 * kk + 1][3]);
  }
  return op;
}

// C[16 x kN] += A[rows a_row0.., kK] * B[kN, kK]^T; both tiles have kK columns.
template <typename T, int kN, int kK>
__device__ __forceinline__ void gemm_abt(Accumulator<kN>& acc, const T* a_tile, int a_row0, const T* b_tile, int lane) {
  using Tile = SwizzledTile<kK>;
  const uint32_t a_base = smem_u32(a_tile), b_base = smem_u32(b_tile);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, Tile::addr(a_base, a_row0 + (lane % 16), kk * 16 + (lane / 16) * 8));
#pragma unroll
    for (int nn = 0; nn < kN / 16; ++nn) {
      uint32_t b[4];
      ldmatrix_x4(b, Tile::addr(b_base, nn * 16 + (lane % 8) + (lane / 16) * 8, kk * 16 + ((lane / 8) % 2) * 8));
      mma_m16n8k16<T>(acc.c[2 * nn], a, b[0], b[1]);
      mma_m16n8k16<T>(acc.c[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// C[16 x kN] += A[16 x kK] (registers) * B[kK, b_col0 .. b_col0 + kN) of a tile
// with kBCols columns.
template <typename T, int kN, int kK, int kBCols>
__device__ __forceinline__ void gemm_rab(Accumulator<kN>& acc, const OperandA<kK>& a, const T* b_tile, int b_col0,
                                         int lane) {
  using Tile = SwizzledTile<kBCols>;
  const uint32_t b_base = smem_u32(b_tile);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
#pragma unroll
    for (int nn = 0; nn < kN / 16; ++nn) {
      uint32_t b[4];
      ldmatrix_x4_trans(
          b, Tile::addr(b_base, kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, b_col0 + nn * 16 + (lane / 16) * 8));
      mma_m16n8k16<T>(acc.c[2 * nn], a.a[kk], b[0], b[1]);
      mma_m16n8k16<T>(acc.c[2 * nn + 1], a.a[kk], b[2], b[3]);
    }
  }
}

// C[16 x kN] += A[kK, a_col0 .. a_col0 + 16)^T * B[kK, kN]; A has kACols columns,
// B has kN columns.
template <typename T, int kN, int kK, int kACols>
__device__ __forceinline__ void gemm_atb(Accumulator<kN>& acc, const T* a_tile, int a_col0, const T* b_tile, int lane) {
  using TileA = SwizzledTile<kACols>;
  using TileB = SwizzledTile<kN>;
  const uint32_t a_base = smem_u32(a_tile), b_base = smem_u32(b_tile);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    ldmatrix_x4_trans(a, TileA::addr(a_base, kk * 16 + (lane % 8) + (lane / 16) * 8, a_col0 + ((lane / 8) % 2) * 8));
#pragma unroll
    for (int nn = 0; nn < kN / 16; ++nn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, TileB::addr(b_base, kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, nn * 16 + (lane / 16) * 8));
      mma_m16n8k16<T>(acc.c[2 * nn], a, b[0], b[1]);
      mma_m16n8k16<T>(acc.c[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// Writes a 16 x kN accumulator, rounded to T, into rows row0.. and columns
// col0.. of a tile with kCols columns (the warp's own rows: no barrier needed
// beyond __syncwarp before they are read back).
template <typename T, int kN, int kCols>
__device__ __forceinline__ void store_accumulator(const Accumulator<kN>& acc, T* tile, int row0, int col0, int lane) {
  using Tile = SwizzledTile<kCols>;
  const int r = row0 + lane / 4, c = col0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    *reinterpret_cast<uint32_t*>(tile + Tile::offset(r, c + 8 * j)) = ElementTraits<T>::pack(acc.c[j][0], acc.c[j][1]);
    *reinterpret_cast<uint32_t*>(tile + Tile::offset(r + 8, c + 8 * j)) =
        ElementTraits<T>::pack(acc.c[j][2], acc.c[j][3]);
  }
}

// Sum over the four lanes of a quad, which together hold one accumulator row.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

}  // namespace blockattn::portable
