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

// load_tile_async's copies for a tile whose rows a round of the CTA's
// threads covers in whole rows (kThreads a multiple of the row's 16-byte
// units), recomputed per call but stepped: thread t copies unit t % U of
// rows t / U + R r (R = kThreads / U rows a round), so its global address
// advances by R rows a round and its shared one by R rows plus one of two
// swizzled columns (row % 8 alternates between two values when R is 4, and
// stays when R is a multiple of 8). load_tile_async spends about 26
// instructions a copy on divisions, a 64-bit multiply and the swizzle;
// FA2's copies about two (docs/perf.md, "Session 46", section 6).
template <int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async_stepped(T* tile, const T* src, int64_t row_stride, int valid_rows) {
  using Layout = tile::SwizzledRows<kCols>;
  constexpr int kUnits = Layout::kUnitsPerRow;
  constexpr int kRowsPerRound = kThreads / kUnits;
  static_assert(kThreads % kUnits == 0 && kCols % 64 == 0 && kRows % kRowsPerRound == 0 &&
                    (kRowsPerRound == 4 || kRowsPerRound % 8 == 0),
                "whole rows a round, 128-byte-multiple rows, a swizzle of one or two values");
  const uint32_t tid = static_cast<uint32_t>(opaque(static_cast<int>(threadIdx.x)));  // unsigned: shifts and masks
  const int unit = static_cast<int>(tid % kUnits), row0 = static_cast<int>(tid / kUnits);
  const uint32_t base = tile::smem_u32(tile) + 2u * static_cast<uint32_t>(row0 * kCols);
  // The two swizzled columns: rows row0 + R r for even and odd r.
  const uint32_t col_even = 16u * static_cast<uint32_t>(unit ^ (row0 & 7));
  const uint32_t col_odd = 16u * static_cast<uint32_t>(unit ^ ((row0 + kRowsPerRound) & 7));
  const T* from = src + row0 * row_stride + unit * 8;
  const int64_t step = kRowsPerRound * row_stride;
#pragma unroll
  for (int round = 0; round < kRows / kRowsPerRound; ++round) {
    const int row = row0 + round * kRowsPerRound;
    const bool valid = row < valid_rows;
    const uint32_t dst = base + 2u * (round * kRowsPerRound * kCols) + (round % 2 == 0 ? col_even : col_odd);
    cp_async_16(dst, valid ? from : src, valid ? 16 : 0);
    from += step;
  }
}

}  // namespace blockattn::sm80
