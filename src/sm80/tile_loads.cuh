// Filling a swizzled shared-memory tile from a block's rows with cp.async.
#pragma once

#include <cstdint>

#include "common/opaque.cuh"
#include "sm80/mma_sync.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::sm80 {

// Whether a kRows-row tile's loads keep their per-thread offsets in
// registers across the persistent loop (the default) or recompute them per
// call. At 128 rows, the swizzled offsets of a thread's copies (eight per tile
// per tensor), hoisted, hold registers the 128-key S rows need: they spilled
// 150-400 bytes. Smaller tiles keep them hoisted: recomputing cost the 64-row
// kernels 1-6% (docs/perf.md, "Block size 128"). A kernel may choose
// otherwise (the sm80 forward at D >= 224, ForwardConfig::kHoistLoadOffsets).
template <int kRows>
inline constexpr bool kHoistLoadOffsets = kRows < 128;

// The thread index the loads use: re-read through opaque()
// (common/opaque.cuh) where the offsets are not to be hoisted, so that the
// compiler recomputes them per call.
template <bool kHoist>
__device__ __forceinline__ int load_thread_index() {
  return kHoist ? static_cast<int>(threadIdx.x) : opaque(static_cast<int>(threadIdx.x));
}

// Every thread of the CTA issues cp.async for part of a kRows x kCols tile read
// from global rows [0, valid_rows) at `src` (rows `row_stride` elements apart).
// Rows at or past valid_rows are zero-filled without touching global memory.
template <int kRows, int kCols, int kThreads, bool kHoist = kHoistLoadOffsets<kRows>, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* src, int64_t row_stride, int valid_rows) {
  using Layout = tile::SwizzledRows<kCols>;
  const uint32_t base = tile::smem_u32(tile);
  const int tid = load_thread_index<kHoist>();
  static_assert((kRows * Layout::kUnitsPerRow) % kThreads == 0, "whole copy rounds");
#pragma unroll
  for (int round = 0; round < kRows * Layout::kUnitsPerRow / kThreads; ++round) {
    const int i = round * kThreads + tid;
    const int row = i / Layout::kUnitsPerRow;
    const int col = (i % Layout::kUnitsPerRow) * 8;
    const bool valid = row < valid_rows;
    const T* from = valid ? src + row * row_stride + col : src;
    cp_async_16(tile::smem_addr<Layout>(base, row, col), from, valid ? 16 : 0);
  }
}

}  // namespace blockattn::sm80
