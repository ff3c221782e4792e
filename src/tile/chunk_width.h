// Widths of the chunks of tile::Chunked (smem_layout.cuh), the sm90 kernels'
// shared-memory tiles, in plain constexpr: the host's tensor maps
// (sm90/tensor_map.cpp) must write exactly the layout the kernels read.
#pragma once

namespace blockattn::tile {

inline constexpr int kChunkCols = 64;        // 16-bit elements per 128-byte chunk row (128-byte swizzle)
inline constexpr int kNarrowChunkCols = 32;  // per 64-byte chunk row (64-byte swizzle)

// The chunk width that reads a head in exact boxes: 32 columns where the
// head is not a whole number of 64-column chunks (D = 32, 96, 160, 224),
// since TMA reads a half-empty box 15-23% slower than an exact one
// (docs/perf.md, "Padded TMA boxes"); 64 elsewhere. Which kernels take it:
// sm90/params.h.
constexpr int chunk_cols(int head_dim) { return head_dim % kChunkCols != 0 ? kNarrowChunkCols : kChunkCols; }

}  // namespace blockattn::tile
