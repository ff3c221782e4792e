// Arguments of the sm90 kernels (plain C++: the backend includes this from a
// .cpp file).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "blockattn/dense.h"
#include "common/attention_params.h"
#include "common/dense_params.h"
#include "core/batch_kind.h"
#include "tile/chunk_width.h"

namespace blockattn::sm90 {

// Columns of the block-diagonal kernels' TMA boxes and shared-memory chunks
// (tile::Chunked), one rule for the kernels and the host's tensor maps: a
// head that is not a whole number of 64-column chunks is read in exact
// 32-column boxes (64-byte swizzle). The backward at D = 32: 93% of copy
// bandwidth at headdim-d32-h16 against 86% with a half-empty 64-column box;
// the forward at D = 96: 70.6 -> 78.9% (H200). Only the forward at D = 32
// keeps a padded box, where it measured the other way (85% exact, 86%
// padded; docs/perf.md, "Padded TMA boxes" and "Exact boxes in the sm_90
// forward").
constexpr int tile_chunk_cols(Operation op, int head_dim) {
  return op == Operation::kForward && head_dim <= 32 ? tile::kChunkCols : tile::chunk_cols(head_dim);
}

// Whether the forward reads the schedule's packed tiles (runs of short
// sequences sharing a tile) for a batch of short sequences: the kernel that
// KernelOf<...>::ShortSequences names, and the table the backend hands it.
// Measured (docs/perf.md, "Packed tiles in the sm90 forward"): tail-d64
// 93.1% -> 97.5% of copy; tail-d128 97.6% -> 86.5%, so D = 64 only until
// the producer passed over the table's empty entries instead of handing each
// a ring slot (session 37): tail-d128 then 96 -> 96.7 on the H100 and
// 83 -> 90.5 on the H200. 64-token blocks only: the schedule packs tiles of
// at most 64 rows (schedule::kMaxPackedBlockSize, a mask bit per row).
constexpr bool forward_packs_short_sequences(int head_dim, int block_size) {
  return block_size == 64 && (head_dim == 64 || head_dim == 128);
}

// Query heads per ring slot of the forward: two neighbouring heads of one
// packed tile, where the kernel issues a tile every ~0.9 us from its single
// producer thread and the consumers wait (D = 64 on packed tiles, no fusion:
// tail-d64 on an H200, docs/perf.md "Session 38"). Each tensor's two head
// tiles come in one TMA box of two heads (Params' pair maps), so a slot
// costs the producer one walk step, one wait and three copies for two tiles,
// and the boxes are 16 KB, as the D = 128 forward's two-chunk tiles.
constexpr int forward_heads_per_slot(int head_dim, int block_size, core::Fusion fusion, BatchKind kind) {
  return head_dim == 64 && block_size == 64 && kind == BatchKind::kShort && fusion == core::Fusion::kNone ? 2 : 1;
}

// Whether the forward's producer stages each tile's rotary table rows in
// shared memory by TMA (a slot per consumer, loaded a tile ahead), where
// 16-bit tables allow it (the host's choice, Params::staged_angles): at
// D = 128 on long batches, where two 16 KB slots fit beside the four 48 KB
// stages and the table's loads after the stage wait were what the rotary
// forward cost (docs/perf.md, "Session 43"). At 128-token blocks, where
// each consumer takes whole tiles (forward_tile_consumers): at D = 64 a
// 16 KB slot per consumer beside the four 48 KB stages; at D = 128 one
// 32 KB slot beside the two 96 KB stages, which the two consumers take in
// turn. (D = 64 at 64-token blocks has none: a third consumer hides the
// table's reads.)
constexpr bool forward_stages_angles(int head_dim, int block_size, core::Fusion fusion, bool packed_tiles) {
  const bool fits = head_dim == 128 ? block_size == 64 || block_size == 128 : head_dim == 64 && block_size == 128;
  return fusion == core::Fusion::kRotary && fits && !packed_tiles;
}

// Whether the per-tile backward has a kernel whose producer stages each
// tile's rotary table rows (16-bit tables, the host's choice as in the
// forward): the row's `StagedTables` kernel, for long batches, which the
// host launches where it encoded the tables' row maps; fp32 tables keep the
// plain kernel. At D = 128 one slot its two consumers take in turn (dS in
// V's buffer frees the 16 KB): H100, rotary over plain backward with bf16
// tables, headline-d128 1.24x -> 1.05-1.06x, sweep-d128-L256-f0.5 1.62x ->
// 1.35-1.39x. At D = 64 a slot per consumer (one slot in tile order read
// 1.47x against 1.10x: docs/perf.md, "Session 44"): headline-d64
// 1.13x -> 1.05-1.07x, and fp32 tables at D = 128 1.31x -> 1.27-1.28x on
// the plain kernel again ("Session 45").
constexpr bool backward_stages_angles(int head_dim, core::Fusion fusion, bool short_kernel) {
  return fusion == core::Fusion::kRotary && (head_dim == 64 || head_dim == 128) && !short_kernel;
}

// Whether a backward row has the grouped-query kernel (grouped_backward.cuh),
// which this backend runs wherever num_q_heads != num_kv_heads; other grouped
// backwards are refused here and run on kPortable. D = 64 and 128 at
// 64-token blocks: each output a consumer owns is one 64-column chunk. Not
// with rotary, whose transpose rotation at D = 128 pairs columns j and
// j + r/2 across the two consumers' halves.
constexpr bool grouped_backward_kernel(int head_dim, int block_size, bool rotary) {
  return (head_dim == 64 || head_dim == 128) && block_size == 64 && !rotary;
}

// Whether a forward row has the grouped-query kernel (grouped_forward.cuh),
// which takes a block's K and V once for all the query heads that read them:
// D = 64 at 64-token blocks, no rotary. (At D = 128 the per-tile forward
// read gqa-d128-h8x2 7 points faster on an H200.)
constexpr bool grouped_forward_kernel(int head_dim, int block_size, bool rotary) {
  return head_dim == 64 && block_size == 64 && !rotary;
}

// Whether the problem's row has a grouped kernel (its Grouped variant),
// whose units are (block, KV head) where the other kernels' tiles are
// (block, query head).
inline bool has_grouped_kernel(const core::Problem& p) {
  const bool rotary = p.fusion() == core::Fusion::kRotary;
  return p.operation == Operation::kBackward ? grouped_backward_kernel(p.shape.head_dim, p.shape.block_size, rotary)
                                             : grouped_forward_kernel(p.shape.head_dim, p.shape.block_size, rotary);
}

// Kernels that store their outputs through TMA (a config's kStoresByTma)
// store 16-row boxes, one per warp and chunk, and rows past a block's end
// with plain stores.
constexpr uint32_t kStoreBoxRows = 16;  // a warp's rows of a tile

// How the per-tile backward (backward_kernel.cuh) walks the rows of an output
// it stores from its staging tile (tile::RowWalk): stepped for batches of
// short sequences on fast memory, per unit everywhere else. The walks read
// and write the same addresses; stepped loads a warp's whole staging rows
// unconditionally and predicates the stores, per unit branches around each.
// Stepped everywhere, against per unit, same runs, % of copy, backward
// (docs/perf.md, "Session 32"):
//   H200: tail-d64 70.5-71.2 -> 74.6-75.0, tail-d128 69.5-69.8 -> 77.0-77.1,
//         sweep-d128-L256-f0.5 (a long batch there) 85.0-89.4 -> 83.6-84.7;
//   H100: tail-d64 78.0-80.3 -> 74.4-77.0, tail-d128 81.9-82.0 -> 79.5-80.8.
// A run-time choice, since a kernel of each walk would add a third of the
// sm_90 backward's build; with its branch per store the H200 reads tail-d64
// 71.6-71.8 and tail-d128 75.0-76.0 (69-70 per unit), the H100 as before.
inline bool backward_stores_stepped(const core::Problem& p, const core::DeviceTraits& device) {
  return p.operation == Operation::kBackward && batch_kind(p, device) == BatchKind::kShort &&
         device.memory_peak_gbps >= core::kFastMemoryGBps;
}

// Rows of the per-tile backward's input boxes (Q, K, V, dO): 16 where its
// tiles pack short sequences at D = 64 and 128 on H100-class memory, so that
// a tile loads only the boxes that cover its rows (loader.cuh's
// load_block_rows); a whole block everywhere else. A packed tile holds about
// 48 rows of 64, and a whole-tile box also read the next tile's first rows:
// tail-d64's backward read 3.09 GB from DRAM for 2.64 GB of inputs, 2.71
// with row boxes, and went 80-81 -> 82.8-85.0% of copy on an H100;
// tail-d128's 80.2-81.1 -> 84.8-86.1. On an H200 tail-d64's read 2.97 ->
// 2.76 GB but lost 72 -> 66 (four times the producer's TMA issues, on a
// tile that takes two thirds of the time), and the forward's packed tiles
// lost 97.4 -> 84.3 on the H100: both keep whole-tile boxes (docs/perf.md,
// "Session 33", items 1 and 3).
constexpr int kPackedTileBoxRows = 16;
static_assert(kPackedTileBoxRows % 16 == 0, "boxes start on whole 1024-byte swizzle atoms (load_block_rows)");
static_assert((kPackedTileBoxRows & (kPackedTileBoxRows - 1)) == 0, "a power of two (rows_in_boxes' mask)");
// The per-tile backward kernels that can load row boxes (their config's
// kRowBoxes; the others keep whole-tile loads compiled in: a run-time box
// loop in the producer cost headdim-d32-h16 3 points).
constexpr bool backward_row_boxes_kernel(int head_dim, BatchKind kind) {
  return (head_dim == 64 || head_dim == 128) && kind == BatchKind::kShort;
}
inline int backward_input_box_rows(const core::Problem& p, const core::DeviceTraits& device) {
  const bool row_boxes = p.operation == Operation::kBackward && !grouped_backward(p) && p.shape.block_size == 64 &&
                         backward_row_boxes_kernel(p.shape.head_dim, batch_kind(p, device)) &&
                         device.memory_peak_gbps < core::kFastMemoryGBps;
  return row_boxes ? kPackedTileBoxRows : p.shape.block_size;
}

struct Params {
  // TMA maps of the inputs (64-byte aligned by their type); dout_map only in
  // the backward.
  CUtensorMap q_map, k_map, v_map, dout_map;
  // Maps of two neighbouring heads' tiles of q, k and v (dims ordered
  // columns, tokens, heads: the box lands as two whole tiles), where the
  // forward takes two heads a slot (forward_heads_per_slot).
  CUtensorMap q_pair_map, k_pair_map, v_pair_map;
  // Store maps of the backward's outputs, where the kernel's config says
  // kStoresByTma (the host reads it as KernelEntry::stores_by_tma).
  CUtensorMap dq_map, dk_map, dv_map;
  // Maps of the rotary cos and sin tables ([P, r/2] rows, boxes of a block's
  // rows), where staged_angles: the kernel stages them
  // (forward_stages_angles; backward_stages_angles, the StagedTables kernel).
  CUtensorMap cos_map, sin_map;
  // Outputs, written with plain 16-byte stores (or the maps above), never
  // past a block's end.
  TensorView out;         // forward
  TensorView dq, dk, dv;  // backward
  AttentionParams attn;
  bool stepped_stores;  // the per-tile backward's row walk: backward_stores_stepped()
  int input_box_rows;   // the inputs' TMA box rows: backward_input_box_rows()
  bool staged_angles;   // cos_map and sin_map are set (forward_stages_angles, backward_stages_angles)
};

// The dense forward's: TMA maps of q, k, v ([B, H, S, D], rank 4) and the
// output, written with plain stores that skip rows past the sequence end. A
// work unit is 64 query rows per consumer warpgroup: three at D = 64, where
// the softmax is long beside the products and a third warpgroup hides more of
// it (docs/perf.md, "Dense forward"), two above.
constexpr int dense_consumers(int head_dim) { return head_dim <= 64 ? 3 : 2; }
constexpr int dense_rows_per_unit(int head_dim) { return 64 * dense_consumers(head_dim); }
// Keys per K/V tile (and TMA box rows): 128 while S, P and O fit in a consumer's
// registers side by side; at D = 256, O alone takes 128 registers per thread
// and 80 keys is what fits (64 would make S = Q K^T m64n64 products, which
// read as many shared-memory bytes per FLOP as the SM can deliver).
constexpr int dense_keys_per_tile(int head_dim) { return head_dim <= 64 ? 128 : head_dim <= 128 ? 176 : 80; }
struct DenseParams {
  CUtensorMap q_map, k_map, v_map;
  DenseTensorView out;
  DenseAttnParams attn;
};

}  // namespace blockattn::sm90
