// TMA tensor maps over strided [T, H, D] tensors, encoded on the host through
// the driver's cuTensorMapEncodeTiled (fetched with
// cudaGetDriverEntryPointByVersion: no link against libcuda).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "blockattn/blockattn.h"
#include "blockattn/dense.h"

namespace blockattn::sm90 {

// Why TMA cannot address this view (a static message), or null when it can.
// Checked on the host before the sm90 backend accepts a problem.
const char* tma_layout_problem(const TensorView& t, int heads);

// Encodes a rank-3 map (columns, heads, tokens) with a box of one
// tile::Chunked chunk's columns (`box_cols`: 64 with 128-byte swizzle, or 32
// with 64-byte swizzle) x 1 head x `box_rows` tokens. Out of range rows and
// columns read as zeros. Returns false, with `error` set, if the driver
// rejects the layout.
bool encode_head_tile_map(CUtensorMap* map, const TensorView& t, DType dtype, int64_t tokens, int heads, int head_dim,
                          int box_cols, uint32_t box_rows, const char** error);

// The same tensor as a rank-3 map (columns, tokens, heads) with a box of 64
// columns x `box_rows` tokens x 2 heads: one copy fills two neighbouring
// heads' whole tiles, one after the other (heads past the tensor read as
// zeros). For head dims of one 64-column chunk.
bool encode_head_pair_map(CUtensorMap* map, const TensorView& t, DType dtype, int64_t tokens, int heads, int head_dim,
                          uint32_t box_rows, const char** error);

// A rotary table's rows ([rows, cols] 16-bit values, `row_stride` elements
// apart) as a rank-2 map with an unswizzled box of cols x `box_rows` rows:
// one copy brings a block's rows (rows past the table read as zeros).
// False, with `error` set, where TMA cannot address them (16-byte aligned
// base and rows, cols a multiple of 8 up to 256, rows below 2^31).
bool encode_table_rows_map(CUtensorMap* map, const void* table, DType dtype, int64_t rows, int cols, int64_t row_stride,
                           uint32_t box_rows, const char** error);

// The dense forward's [B, H, S, D] views: a rank-4 map (columns, rows, heads,
// batch) with the same swizzle and a box of 64 columns x `box_rows` rows.
const char* dense_tma_layout_problem(const DenseTensorView& t, int64_t batch, int heads, int64_t seq_len);
bool encode_dense_tile_map(CUtensorMap* map, const DenseTensorView& t, DType dtype, int64_t batch, int heads,
                           int64_t seq_len, int head_dim, uint32_t box_rows, const char** error);

}  // namespace blockattn::sm90
