// Moving a warp's 16 rows between accumulators, shared-memory tiles and global
// memory, for any tile layout (smem_layout.cuh). Outputs leave this way in
// every kernel: staged as 16-bit rows in a tile no one reads any more, then
// 16-byte stores that skip rows past the block's end, so nothing outside a
// block is ever written.
#pragma once

#include "tile/fragments.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::tile {

// Writes a warp's 16 x kN accumulator rows (rows row0.., columns col0..),
// scaled per row, rounded to T, into a tile.
template <typename Layout, typename T, int kN>
__device__ __forceinline__ void stage_rows(const Accumulator<kN>& acc, const RowScale& scale, T* tile, int row0,
                                           int col0, int lane) {
  const int r = row0 + lane / 4;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r, col)) =
        pack2<T>(acc.c[j][0] * scale.row[0], acc.c[j][1] * scale.row[0]);
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r + 8, col)) =
        pack2<T>(acc.c[j][2] * scale.row[1], acc.c[j][3] * scale.row[1]);
  }
}

// The same for an accumulator already packed into A-operand fragments
// (to_operand): the bits stage_rows writes with a scale of 1, from half the
// registers.
template <typename Layout, int kK, typename T>
__device__ __forceinline__ void stage_operand_rows(const OperandA<kK>& op, T* tile, int row0, int lane) {
  const int r = row0 + lane / 4;
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    const int col = 16 * kk + 2 * (lane % 4);
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r, col)) = op.a[kk][0];
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r + 8, col)) = op.a[kk][1];
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r, col + 8)) = op.a[kk][2];
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r + 8, col + 8)) = op.a[kk][3];
  }
}

// Stores a warp's 16 staged rows [row0, row0 + 16) of a kCols-wide tile to
// `dst` (rows `row_stride` elements apart) with 16-byte stores, skipping rows
// at or past valid_rows.
template <typename Layout, int kCols, typename T>
__device__ __forceinline__ void store_rows(const T* tile, int row0, T* dst, int64_t row_stride, int valid_rows,
                                           int lane) {
  constexpr int kUnitsPerRow = kCols / 8;
#pragma unroll
  for (int round = 0; round < kUnitsPerRow / 2; ++round) {  // 16 rows x kUnitsPerRow units over 32 lanes
    const int u = round * 32 + lane;
    const int row = row0 + u / kUnitsPerRow, col = (u % kUnitsPerRow) * 8;
    if (row < valid_rows)
      *reinterpret_cast<uint4*>(dst + row * row_stride + col) =
          *reinterpret_cast<const uint4*>(tile + Layout::offset(row, col));
  }
}

// An output's way out: the warp's 16 x kN accumulator rows, scaled and
// rounded, staged in a kN-wide tile the warp owns, then (once every lane has
// written) its first kStoreCols columns stored to `dst` up to valid_rows
// (fewer than kN where a head's columns were padded to a whole tile).
template <typename Layout, typename T, int kN, int kStoreCols = kN>
__device__ __forceinline__ void write_rows(const Accumulator<kN>& acc, const RowScale& scale, T* staging, int row0,
                                           T* dst, int64_t row_stride, int valid_rows, int lane) {
  static_assert(kStoreCols <= kN, "stores only columns the accumulator has");
  stage_rows<Layout, T>(acc, scale, staging, row0, 0, lane);
  __syncwarp();
  store_rows<Layout, kStoreCols>(staging, row0, dst, row_stride, valid_rows, lane);
}

// Writes the first kStoreCols columns of a warp's 16 x kN accumulator rows
// (rows row0.. of `dst`, rows `row_stride` elements apart), scaled per row and
// rounded to T, straight from registers with 4-byte stores, skipping rows at
// or past valid_rows. For outputs that have no dead shared-memory tile to
// stage in, or too many columns to stage without spilling.
template <typename T, int kN, int kStoreCols = kN>
__device__ __forceinline__ void store_rows_direct(const Accumulator<kN>& acc, const RowScale& scale, T* dst,
                                                  int64_t row_stride, int row0, int valid_rows, int lane) {
  static_assert(kStoreCols <= kN && kStoreCols % 8 == 0, "whole fragments the accumulator has");
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + lane / 4 + 8 * r;
    if (row >= valid_rows) continue;
    T* out = dst + row * row_stride + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kStoreCols / 8; ++j)
      *reinterpret_cast<uint32_t*>(out + 8 * j) =
          pack2<T>(acc.c[j][2 * r] * scale.row[r], acc.c[j][2 * r + 1] * scale.row[r]);
  }
}

// Zeroes rows [valid_rows, kRows) of a kCols-wide tile with kThreads threads
// (`tid` in [0, kThreads)). Rows past a block's end hold the next sequence's
// values (or TMA zeros); products must see zeros there, since 0 * inf is NaN.
template <typename Layout, int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void zero_rows_from(T* tile, int valid_rows, int tid) {
  constexpr int kUnitsPerRow = kCols / 8;
  for (int u = tid; u < (kRows - valid_rows) * kUnitsPerRow; u += kThreads) {
    const int row = valid_rows + u / kUnitsPerRow, col = (u % kUnitsPerRow) * 8;
    *reinterpret_cast<uint4*>(tile + Layout::offset(row, col)) = make_uint4(0, 0, 0, 0);
  }
}

}  // namespace blockattn::tile
