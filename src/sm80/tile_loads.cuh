// Filling a swizzled shared-memory tile from a block's rows with cp.async.
#pragma once

#include <cstdint>

#include "sm80/mma_sync.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::sm80 {

// Every thread of the CTA issues cp.async for part of a kRows x kCols tile read
// from global rows [0, valid_rows) at `src` (rows `row_stride` elements apart).
// Rows at or past valid_rows are zero-filled without touching global memory.
template <int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* src, int64_t row_stride, int valid_rows) {
  using Layout = tile::SwizzledRows<kCols>;
  const uint32_t base = tile::smem_u32(tile);
  static_assert((kRows * Layout::kUnitsPerRow) % kThreads == 0, "whole copy rounds");
#pragma unroll
  for (int round = 0; round < kRows * Layout::kUnitsPerRow / kThreads; ++round) {
    const int i = round * kThreads + threadIdx.x;
    const int row = i / Layout::kUnitsPerRow;
    const int col = (i % Layout::kUnitsPerRow) * 8;
    const bool valid = row < valid_rows;
    const T* from = valid ? src + row * row_stride + col : src;
    cp_async_16(tile::smem_addr<Layout>(base, row, col), from, valid ? 16 : 0);
  }
}

}  // namespace blockattn::sm80
