// Widths of the chunks of tile::Chunked (smem_layout.cuh), the sm90 kernels'
// shared-memory tiles, in plain constexpr: the host's tensor maps
// (sm90/tensor_map.cpp) must write exactly the layout the kernels read.
#pragma once

namespace blockattn::tile {

inline constexpr int kChunkCols = 64;        // 16-bit elements per 128-byte chunk row (128-byte swizzle)
inline constexpr int kNarrowChunkCols = 32;  // per 64-byte chunk row (64-byte swizzle)

// The narrowest chunk that holds a head of head_dim columns without padding
// it to 64: one 32-column chunk for D = 32 (a 64-column TMA box of it would be
// half zeros, which TMA reads 15-23% slower than an exact box: docs/perf.md,
// "Padded TMA boxes"). Wider heads that are not a multiple of 64 (96, 160,
// 224) still pad their last chunk. Which kernels take it: sm90/params.h.
constexpr int chunk_cols(int head_dim) { return head_dim < kChunkCols ? kNarrowChunkCols : kChunkCols; }

}  // namespace blockattn::tile
