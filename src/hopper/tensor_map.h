// TMA tensor maps over strided [T, H, D] tensors, encoded on the host through
// the driver's cuTensorMapEncodeTiled (fetched with
// cudaGetDriverEntryPointByVersion: no link against libcuda).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "blockattn/blockattn.h"

namespace blockattn::hopper {

// Box of one TMA load: 64 columns (128 bytes, the 128-byte swizzle width) x
// 1 head x `box_rows` tokens.
inline constexpr uint32_t kBoxCols = 64;

// Encodes a rank-3 map (columns, heads, tokens) with 128-byte swizzle. Out of
// range rows read as zeros. Returns false, with `error` set, if the driver
// rejects the layout (the caller then uses the portable path).
bool encode_head_tile_map(CUtensorMap* map, const TensorView& t, DType dtype, int64_t tokens, int heads, int head_dim,
                          uint32_t box_rows, const char** error);

}  // namespace blockattn::hopper
