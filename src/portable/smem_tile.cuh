// Shared-memory tiles of 16-bit elements and the copies in and out of them.
//
// A tile has kCols columns (a multiple of 64, so a row is at least 128 bytes =
// eight 16-byte chunks). Chunk c of row r is stored at chunk position
// c ^ (r % 8): the eight row addresses of an ldmatrix, and the 16-byte
// accesses of a warp, then fall in distinct banks.
#pragma once

#include <cstdint>

#include "portable/mma_sm80.cuh"

namespace blockattn::portable {

template <int kCols>
struct SwizzledTile {
  static_assert(kCols % 64 == 0, "a swizzled row needs at least eight 16-byte chunks");
  static constexpr int kChunksPerRow = kCols / 8;

  // Element offset of (row, col); col is a multiple of 8 or within one chunk.
  __device__ static __forceinline__ int offset(int row, int col) {
    return row * kCols + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
  }
  // Byte address in the shared window, for ldmatrix and cp.async.
  __device__ static __forceinline__ uint32_t addr(uint32_t base, int row, int col) {
    return base + 2u * static_cast<uint32_t>(offset(row, col));
  }
};

// Every thread of the CTA issues cp.async for part of a kRows x kCols tile read
// from global rows [0, valid_rows) at `src` (rows `row_stride` elements apart).
// Rows at or past valid_rows are zero-filled without touching global memory.
template <int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* src, int64_t row_stride, int valid_rows) {
  using Tile = SwizzledTile<kCols>;
  const uint32_t base = smem_u32(tile);
  static_assert((kRows * Tile::kChunksPerRow) % kThreads == 0, "whole copy rounds");
#pragma unroll
  for (int round = 0; round < kRows * Tile::kChunksPerRow / kThreads; ++round) {
    const int i = round * kThreads + threadIdx.x;
    const int row = i / Tile::kChunksPerRow;
    const int col = (i % Tile::kChunksPerRow) * 8;
    const bool valid = row < valid_rows;
    const T* from = valid ? src + row * row_stride + col : src;
    cp_async_16(Tile::addr(base, row, col), from, valid ? 16 : 0);
  }
}

// One warp writes its 16 rows [row0, row0 + 16) of a tile to global memory
// with 16-byte stores, skipping rows at or past valid_rows.
template <int kCols, typename T>
__device__ __forceinline__ void store_warp_rows(const T* tile, int row0, T* dst, int64_t row_stride, int valid_rows,
                                                int lane) {
  using Tile = SwizzledTile<kCols>;
#pragma unroll
  for (int round = 0; round < Tile::kChunksPerRow / 2; ++round) {
    const int i = round * 32 + lane;
    const int row = row0 + i / Tile::kChunksPerRow;
    const int col = (i % Tile::kChunksPerRow) * 8;
    if (row < valid_rows) {
      const uint4 chunk = *reinterpret_cast<const uint4*>(tile + Tile::offset(row, col));
      *reinterpret_cast<uint4*>(dst + row * row_stride + col) = chunk;
    }
  }
}

}  // namespace blockattn::portable
