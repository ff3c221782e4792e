// The sm90 storer: a warp's staged rows of an output tile leave through TMA
// (cp.async.bulk.tensor, shared -> global), one 16-row box per chunk, issued
// by lane 0. The TMA unit writes whole box rows in as few L2 requests as the
// rows' alignment allows, where 16-byte stores from 32 lanes touch one more
// 128-byte line per row that starts 64 bytes into one (every other head at
// D = 224: docs/perf.md, "The D = 224 backward's stores").
#pragma once

#include <cstdint>

#include <cuda.h>

#include "common/attention_params.h"
#include "sm90/params.h"
#include "sm90/sync.cuh"
#include "tile/row_io.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// Stores rows [row0, row0 + 16) of kChunks chunks of a tile staged as
// `Layout` (tile::Chunked) at `staging`, to columns col0.. of `head`, tokens
// row_begin + row0.., through a map whose box is one chunk x 16 rows. Every
// lane must have staged its part of those rows; the rows must all lie inside
// the block (a box writes all 16).
template <typename Layout, int kChunks>
__device__ __forceinline__ void store_warp_rows(const CUtensorMap* map, const void* staging, int row0, int head,
                                                int col0, int32_t row_begin, int lane) {
  ptx::fence_proxy_async(ptx::space_shared);  // this lane's staged writes, seen by the TMA unit's reads
  __syncwarp();
  if (lane == 0) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int32_t at[3] = {col0 + c * Layout::kChunkColumns, head, row_begin + row0};
      ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, map, at,
                                static_cast<const unsigned char*>(staging) + c * Layout::kChunkBytes +
                                    row0 * Layout::kRowBytes);
    }
    ptx::cp_async_bulk_commit_group();
  }
}

// Before a warp writes rows that it stored through TMA: the TMA unit has read
// them (not yet necessarily written them to global memory, which nothing
// here waits for), and every lane knows it.
__device__ __forceinline__ void wait_store_reads(int lane) {
  if (lane == 0) ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});
  __syncwarp();
}

// A warp's 16 staged rows of an output (kCols columns of chunks from
// `staging`, which holds output column col0 onward) to its place in `out`:
// through TMA where every row lies inside the block, with plain stores
// (kWalk) where some pass its end, whose rows belong to the next block.
// Every lane must have staged its part; call wait_store_reads() before the
// warp writes these rows again.
template <typename Layout, int kCols, tile::RowWalk kWalk, typename T>
__device__ __forceinline__ void store_staged_rows(const CUtensorMap& map, const T* staging, const TensorView& out,
                                                  const schedule::BlockDesc& block, int head, int col0, int row0,
                                                  int lane) {
  static_assert(kCols % Layout::kChunkColumns == 0, "whole chunks to store");
  if (row0 + static_cast<int>(kStoreBoxRows) <= block.row_count) {
    store_warp_rows<Layout, kCols / Layout::kChunkColumns>(&map, staging, row0, head, col0, block.row_begin, lane);
  } else {
    __syncwarp();
    tile::store_rows<Layout, kCols, kWalk>(staging, row0, tile::head_rows_out<T>(out, block, head) + col0,
                                           out.token_stride, block.row_count, lane);
  }
}

}  // namespace blockattn::sm90
