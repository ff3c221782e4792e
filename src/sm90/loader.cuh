// The sm90 loader: TMA copies of one block's rows of several [T, H, D]
// tensors into chunked shared-memory tiles (tile::Chunked), all completing on
// the stage's `full` barrier. Rows past T read as zeros.
#pragma once

#include <cuda.h>

#include "sm90/sync.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::sm90 {

// One tile to fill: its tensor map, the head to read and where it goes.
struct TmaTile {
  const CUtensorMap* map;
  int head;
  void* dst;
};

// Issues the copies chunk by chunk (all tensors' chunk 0, then chunk 1, ...),
// for rows [row_begin, row_begin + box rows) of each tile's head, into tiles
// laid out as `Layout` (tile::Chunked: a chunk per box).
template <typename Layout, int kChunks, int kN>
__device__ __forceinline__ void load_block_tiles(const TmaTile (&tiles)[kN], int32_t row_begin, Barrier& full) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      const int32_t at[3] = {c * Layout::kChunkColumns, tiles[n].head, row_begin};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global,
                                static_cast<unsigned char*>(tiles[n].dst) + c * Layout::kChunkBytes, tiles[n].map, at,
                                &full.word);
    }
}

// One box of a pair map (tensor_map.h's encode_head_pair_map): rows
// [row_begin, row_begin + box rows) of heads `head` and `head + 1`, landing
// as two whole tiles of one 64-column chunk, the second right after the
// first.
__device__ __forceinline__ void load_head_pair(const CUtensorMap* pair_map, int head, void* dst, int32_t row_begin,
                                               Barrier& full) {
  const int32_t at[3] = {0, row_begin, head};
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, pair_map, at, &full.word);
}

// The same in boxes of `box_rows` rows (the maps' box; a divisor of the
// tile's rows), only as many as cover a tile's `rows`: a packed tile of short
// sequences reads no more than a box past its own rows. Box r lands r rows
// into its chunk; the swizzle pattern repeats every 1024 bytes (8 rows of
// 128 bytes, 16 of 64), so a box must start on such a boundary: 16-row boxes
// do at either width. The caller announces the bytes of rows_in_boxes() rows
// per tile on `full`.
template <typename Layout, int kChunks, int kN>
__device__ __forceinline__ void load_block_rows(const TmaTile (&tiles)[kN], int32_t row_begin, int rows, int box_rows,
                                                Barrier& full) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll 1
      for (int r = 0; r < rows; r += box_rows) {
        const int32_t at[3] = {c * Layout::kChunkColumns, tiles[n].head, row_begin + r};
        ptx::cp_async_bulk_tensor(
            ptx::space_cluster, ptx::space_global,
            static_cast<unsigned char*>(tiles[n].dst) + c * Layout::kChunkBytes + r * Layout::kRowBytes, tiles[n].map,
            at, &full.word);
      }
}
// Rows of each tile that load_block_rows fills: `rows` rounded up to whole
// boxes. `box_rows` is a power of two (16, or a 64-token block), so the
// rounding is a mask: the producer runs this per tile, and a division by a
// run-time value there is some 20 instructions on its serial walk.
__device__ __forceinline__ int rows_in_boxes(int rows, int box_rows) { return (rows + box_rows - 1) & -box_rows; }

// Rows [first_row, first_row + kRows) of the rotary cos and sin tables
// (tensor_map.h's encode_table_rows_map, boxes of kRows rows x `half`
// 16-bit values: rows past the table read as zeros and count), each box
// landing whole at its destination; announces their bytes on `full`.
template <int kRows>
__device__ __forceinline__ void load_table_rows(const CUtensorMap* cos_map, const CUtensorMap* sin_map,
                                                int32_t first_row, int half, void* cos_dst, void* sin_dst,
                                                Barrier& full) {
  full.arrive_expect_tx(2 * kRows * static_cast<uint32_t>(half) * 2);
  const int32_t at[2] = {0, first_row};
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, cos_dst, cos_map, at, &full.word);
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sin_dst, sin_map, at, &full.word);
}

// The dense forward's: rows [row, row + box rows) of one (batch, head) of a
// [B, H, S, D] tensor (rank-4 map, sm90/tensor_map.h), chunk by chunk.
template <int kChunks, int kChunkBytes>
__device__ __forceinline__ void load_dense_tile(const CUtensorMap* map, void* dst, int32_t row, int32_t head,
                                                int32_t batch, Barrier& full) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int32_t at[4] = {c * tile::kChunkCols, row, head, batch};
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, static_cast<unsigned char*>(dst) + c * kChunkBytes,
                              map, at, &full.word);
  }
}

}  // namespace blockattn::sm90
