// Staging a warp's 16 accumulator rows in a shared-memory tile with
// stmatrix (sm_90): one instruction per 16 columns, where tile::stage_rows
// spends four 4-byte stores, each with its own swizzled address. In the
// grouped backward at D = 64 the staging of P, dS and dQ took 48 stores and
// about as many address instructions of the 889 a warp issues per head
// (docs/perf.md, "Session 47").
#pragma once

#include <cstdint>

#include "tile/fragments.cuh"
#include "tile/row_io.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::sm90 {

// ldmatrix_x4's inverse: register i of every lane into matrix i, whose eight
// row addresses lanes 8i..8i+7 give. No libcu++ header has stmatrix.
__device__ __forceinline__ void stmatrix_x4(const uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// The tile position lane l addresses for matrix i of a 16-column step at
// column c: row row0 + l % 8 + 8 ((l / 8) % 2), column c + 8 (l / 16)
// (matrix i is rows row0 + 8 (i % 2).., columns c + 8 (i / 2)..).
__device__ __forceinline__ int matrix_lane_row(int row0, int lane) { return row0 + lane % 8 + 8 * ((lane / 8) % 2); }
__device__ __forceinline__ int matrix_lane_col(int lane) { return 8 * (lane / 16); }

// Fragments in A-operand shape (tile::to_operand: a[kk][0..3] = rows g and
// g + 8 of columns 16 kk.. and 16 kk + 8..) written as the warp's rows
// row0.. of a `Layout` tile at byte address `base`, k-step kk at column 16 kk.
template <typename Layout, int kK>
__device__ __forceinline__ void stage_operand_matrices(const tile::OperandA<kK>& op, uint32_t base, int row0,
                                                       int lane) {
  const int row = matrix_lane_row(row0, lane), col = matrix_lane_col(lane);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
    stmatrix_x4(op.a[kk], tile::smem_addr<Layout>(base, row, 16 * kk + col));
}

// tile::stage_rows by stmatrix: the warp's 16 x kN accumulator rows, scaled
// per row and rounded to T, into rows row0.. and columns col0.. of a
// `Layout` tile; 16 columns at a time, so that no more than four packed
// registers are live beside the accumulator (a D = 128 output whole would
// hold 64).
template <typename Layout, typename T, int kN>
__device__ __forceinline__ void stage_rows_by_matrices(const tile::Accumulator<kN>& acc, const tile::RowScale& scale,
                                                       uint32_t base, int row0, int lane, int col0 = 0) {
  const int row = matrix_lane_row(row0, lane), col = col0 + matrix_lane_col(lane);
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk) {
    const float(&lo)[4] = acc.c[2 * kk];
    const float(&hi)[4] = acc.c[2 * kk + 1];
    const uint32_t r[4] = {tile::pack2<T>(lo[0] * scale.row[0], lo[1] * scale.row[0]),
                           tile::pack2<T>(lo[2] * scale.row[1], lo[3] * scale.row[1]),
                           tile::pack2<T>(hi[0] * scale.row[0], hi[1] * scale.row[0]),
                           tile::pack2<T>(hi[2] * scale.row[1], hi[3] * scale.row[1])};
    stmatrix_x4(r, tile::smem_addr<Layout>(base, row, 16 * kk + col));
  }
}

// tile::write_rows with the staging by stmatrix.
template <typename Layout, typename T, int kN, int kStoreCols = kN, tile::RowWalk kWalk = tile::RowWalk::kStepped>
__device__ __forceinline__ void write_rows_by_matrices(const tile::Accumulator<kN>& acc, const tile::RowScale& scale,
                                                       T* staging, int row0, T* dst, int64_t row_stride, int valid_rows,
                                                       int lane) {
  static_assert(kStoreCols <= kN, "stores only columns the accumulator has");
  stage_rows_by_matrices<Layout, T>(acc, scale, tile::smem_u32(staging), row0, lane);
  __syncwarp();
  tile::store_rows<Layout, kStoreCols, kWalk>(staging, row0, dst, row_stride, valid_rows, lane);
}

}  // namespace blockattn::sm90
