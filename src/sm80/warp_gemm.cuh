// Warp-level 16-row matrix products (mma.sync) over swizzled shared-memory
// tiles: the three shapes attention needs, named by where the operands live and whether the
// shared-memory operand is read as stored (N) or transposed (T).
//
//   gemm_abt  C += A B^T   A: 16 rows of a tile [16.., K]   B: tile [N, K]
//                          (S = Q K^T, dP = dO V^T)
//   gemm_rab  C += A B     A: registers (16 x K)            B: tile [K, N]
//                          (O = P V, dQ = dS K)
//   gemm_atb  C += A^T B   A: 16 columns of a tile [K, ..]  B: N columns of a tile [K, ..]
//                          (dV = P^T dO, dK = dS^T Q)
#pragma once

#include "sm80/mma_sync.cuh"
#include "tile/fragments.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::sm80 {

using tile::Accumulator;
using tile::OperandA;

// C[16 x kN] += A[rows a_row0.., kK] * B[kN, kK]^T; both tiles have kK columns.
template <typename T, int kN, int kK>
__device__ __forceinline__ void gemm_abt(Accumulator<kN>& acc, const T* a_tile, int a_row0, const T* b_tile, int lane) {
  using Layout = tile::SwizzledRows<kK>;
  const uint32_t a_base = tile::smem_u32(a_tile), b_base = tile::smem_u32(b_tile);
  // Wide heads: unrolled whole, the k loop's fragment loads would be hoisted
  // past what the registers hold (spills at D = 256).
  constexpr int kUnroll = kK > 128 ? 8 : kK / 16;
#pragma unroll kUnroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    tile::ldmatrix_x4(a, tile::smem_addr<Layout>(a_base, a_row0 + (lane % 16), kk * 16 + (lane / 16) * 8));
#pragma unroll
    for (int nn = 0; nn < kN / 16; ++nn) {
      uint32_t b[4];
      tile::ldmatrix_x4(
          b, tile::smem_addr<Layout>(b_base, nn * 16 + (lane % 8) + (lane / 16) * 8, kk * 16 + ((lane / 8) % 2) * 8));
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
  using Layout = tile::SwizzledRows<kBCols>;
  const uint32_t b_base = tile::smem_u32(b_tile);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
#pragma unroll
    for (int nn = 0; nn < kN / 16; ++nn) {
      uint32_t b[4];
      tile::ldmatrix_x4_trans(b, tile::smem_addr<Layout>(b_base, kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8,
                                                         b_col0 + nn * 16 + (lane / 16) * 8));
      mma_m16n8k16<T>(acc.c[2 * nn], a.a[kk], b[0], b[1]);
      mma_m16n8k16<T>(acc.c[2 * nn + 1], a.a[kk], b[2], b[3]);
    }
  }
}

// C[16 x kN] += A[kK, a_col0 .. a_col0 + 16)^T * B[kK, b_col0 .. b_col0 + kN);
// A has kACols columns, B has kBCols.
template <typename T, int kN, int kK, int kACols, int kBCols>
__device__ __forceinline__ void gemm_atb(Accumulator<kN>& acc, const T* a_tile, int a_col0, const T* b_tile, int b_col0,
                                         int lane) {
  using LayoutA = tile::SwizzledRows<kACols>;
  using LayoutB = tile::SwizzledRows<kBCols>;
  const uint32_t a_base = tile::smem_u32(a_tile), b_base = tile::smem_u32(b_tile);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    tile::ldmatrix_x4_trans(
        a, tile::smem_addr<LayoutA>(a_base, kk * 16 + (lane % 8) + (lane / 16) * 8, a_col0 + ((lane / 8) % 2) * 8));
#pragma unroll
    for (int nn = 0; nn < kN / 16; ++nn) {
      uint32_t b[4];
      tile::ldmatrix_x4_trans(b, tile::smem_addr<LayoutB>(b_base, kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8,
                                                          b_col0 + nn * 16 + (lane / 16) * 8));
      mma_m16n8k16<T>(acc.c[2 * nn], a, b[0], b[1]);
      mma_m16n8k16<T>(acc.c[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

}  // namespace blockattn::sm80
