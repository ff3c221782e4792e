// Moving data in and out of the chunked, 128-byte-swizzled 64-row tiles that
// TMA fills (see wgmma.cuh for the layout): zeroing rows past a block's end,
// staging a warp's accumulator rows, and storing a warp's rows to global
// memory without touching rows past the block's end.
#pragma once

#include "hopper/wgmma.cuh"
#include "portable/warp_gemm.cuh"

namespace blockattn::hopper {

// Element offset of (row, col) in a 64-row tile.
__device__ __forceinline__ int tile_offset(int row, int col) { return chunked_tile_offset(row, col, kBlockSize); }

// Zeroes rows [valid_rows, 64) of a tile with the 128 threads of a warpgroup
// (`tid` in [0, 128)). Rows past a block's end hold the next sequence's values
// (or TMA zeros); the products must see zeros there, since 0 * inf is NaN.
// The caller fences (fence_async_shared) and synchronizes before wgmma reads.
template <typename T, int D>
__device__ __forceinline__ void zero_rows_from(T* tile, int valid_rows, int tid) {
  constexpr int kUnitsPerRow = D / 8;  // 16-byte units
  for (int u = tid; u < (kBlockSize - valid_rows) * kUnitsPerRow; u += 128) {
    const int row = valid_rows + u / kUnitsPerRow, col = (u % kUnitsPerRow) * 8;
    *reinterpret_cast<uint4*>(tile + tile_offset(row, col)) = make_uint4(0, 0, 0, 0);
  }
}

// Writes a warp's 16 x kN accumulator rows (rows row0.., columns col0..),
// scaled per row, rounded to T, into a tile.
template <typename T, int kN>
__device__ __forceinline__ void stage_rows(const portable::Accumulator<kN>& acc, const float (&row_scale)[2], T* tile,
                                           int row0, int col0, int lane) {
  const int r = row0 + lane / 4;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
    *reinterpret_cast<uint32_t*>(tile + tile_offset(r, col)) =
        portable::ElementTraits<T>::pack(acc.c[j][0] * row_scale[0], acc.c[j][1] * row_scale[0]);
    *reinterpret_cast<uint32_t*>(tile + tile_offset(r + 8, col)) =
        portable::ElementTraits<T>::pack(acc.c[j][2] * row_scale[1], acc.c[j][3] * row_scale[1]);
  }
}

// Stores a warp's 16 staged rows [row0, row0 + 16) to `dst` (rows
// `row_stride` apart) with 16-byte stores, skipping rows at or past valid_rows.
template <typename T, int D>
__device__ __forceinline__ void store_staged_rows(const T* tile, int row0, T* dst, int64_t row_stride, int valid_rows,
                                                  int lane) {
#pragma unroll
  for (int round = 0; round < D / 16; ++round) {  // 16 rows x D/8 units over 32 lanes
    const int u = round * 32 + lane;
    const int row = row0 + u / (D / 8), col = (u % (D / 8)) * 8;
    if (row < valid_rows)
      *reinterpret_cast<uint4*>(dst + row * row_stride + col) =
          *reinterpret_cast<const uint4*>(tile + tile_offset(row, col));
  }
}

}  // namespace blockattn::hopper
