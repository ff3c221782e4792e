// What the backward kernels in tensor_ring.cuh's frame share: a tile's four
// tensors in load (= release) order, their loader, and the start of every
// tile (wait, zero the rows past the block end, run the prologue hook).
#pragma once

#include "sm90/loader.cuh"
#include "sm90/params.h"
#include "sm90/tensor_ring.cuh"
#include "tile/row_io.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// V is free once S and dP are done, K once dQ is, dO once dV is, Q once dK is.
enum BackwardTensor : int { kTensorV = 0, kTensorK = 1, kTensorDout = 2, kTensorQ = 3, kBackwardTensors = 4 };

// The producer's part: tensor n of tile t into `slot` (kChunks chunks laid
// out as `Layout`), completing on `full`.
template <typename Layout, int kChunks>
__device__ __forceinline__ void load_backward_tensor(const Params& p, const tile::TileCoords& t, int n, void* slot,
                                                     Barrier& full) {
  const TmaTile tiles[1] = {n == kTensorV      ? TmaTile{&p.v_map, t.kv_head, slot}
                            : n == kTensorK    ? TmaTile{&p.k_map, t.kv_head, slot}
                            : n == kTensorDout ? TmaTile{&p.dout_map, t.q_head, slot}
                                               : TmaTile{&p.q_map, t.q_head, slot}};
  load_block_tiles<Layout, kChunks>(tiles, t.block.row_begin, full);
}

// A tile's preparation, by kThreads threads (`tid` in [0, kThreads)) that
// have waited for its four tensors: zero their rows past the block end
// (every product must see zeros there), run the prologue hook, and order
// those generic writes before the products (async proxy) read them.
// Returns whether it wrote any.
template <typename Layout, int kRows, int kCols, int kThreads, tile::PrologueReads kReads, typename T, typename Hooks,
          typename Tensors>
__device__ __forceinline__ bool prepare_backward_tensors(const Hooks& hooks, const tile::TileCoords& t,
                                                         const Tensors& in, int tid) {
  const int valid = t.block.row_count;
  T* const q = in.template data<T>(kTensorQ);
  T* const k = in.template data<T>(kTensorK);
  T* const v = in.template data<T>(kTensorV);
  if (valid < kRows) {
    tile::zero_rows_from<Layout, kRows, kCols, kThreads>(q, valid, tid);
    tile::zero_rows_from<Layout, kRows, kCols, kThreads>(k, valid, tid);
    tile::zero_rows_from<Layout, kRows, kCols, kThreads>(v, valid, tid);
    tile::zero_rows_from<Layout, kRows, kCols, kThreads>(in.template data<T>(kTensorDout), valid, tid);
  }
  hooks.template prologue<Layout, kRows, kCols, kThreads, kReads>(t, tid, q, k, v);
  const bool wrote = valid < kRows || Hooks::kModifiesOperands;
  if (wrote) fence_async_shared();
  return wrote;
}

// The consumers' first step on a tile, all kThreads of them: wait for the
// four tensors and, unless the preparers did (a prepared ring), prepare them
// together.
template <typename Layout, int kRows, int kCols, int kThreads, typename T, typename Hooks, typename Tensors>
__device__ __forceinline__ void begin_backward_tile(const Hooks& hooks, const tile::TileCoords& t, const Tensors& in,
                                                    int tid) {
  for (int n = 0; n < kBackwardTensors; ++n)
    in.wait(n);
  if constexpr (!Tensors::kPrepared) {
    // Every consumer's writes are done before any product reads the tiles.
    if (prepare_backward_tensors<Layout, kRows, kCols, kThreads, tile::PrologueReads::kInTurn, T>(hooks, t, in, tid))
      named_barrier_sync(kConsumersBarrier, kThreads);
  }
}

// The preparers' part of a tile in a prepared ring (tensor_ring.cuh): the
// same preparation by warpgroup 0's three spare warps, handed over by
// `ready`. They run nothing else, so they read ahead (tile::PrologueReads).
template <typename Layout, int kRows, int kCols, typename T, typename Hooks, typename Tensors>
__device__ __forceinline__ void prepare_backward_tile(const Hooks& hooks, const tile::TileCoords& t, const Tensors& in,
                                                      int tid) {
  constexpr int kThreads = Tensors::kPreparers;
  for (int n = 0; n < kBackwardTensors; ++n)
    in.wait_landed(n);
  prepare_backward_tensors<Layout, kRows, kCols, kThreads, tile::PrologueReads::kAhead, T>(hooks, t, in, tid);
  for (int n = 0; n < kBackwardTensors; ++n)
    in.mark_ready(n);
}

// A whole kernel body: the tensor ring frame over the (block, head) tiles
// (Hq == Hkv), the loader above, and op(coords, tensors, consumer). The
// coordinates come with what the hooks read per tile looked up
// (look_ahead: a rotary tile's first table row), before the wait for the
// tile's tensors.
template <typename Cfg, typename Ring, typename Hooks, typename TileOp>
__device__ __forceinline__ void run_backward_tensor_ring(const Params& p, const Ring& ring, const Hooks& hooks,
                                                         TileOp&& op) {
  const int num_tiles = p.attn.schedule.block_count() * p.attn.num_q_heads;
  run_tensor_ring<Cfg>(
      ring, num_tiles, [&](int tile) { return hooks.look_ahead(tile::TileCoords::per_query_head(p.attn, tile)); },
      [&](const tile::TileCoords& t, int n, unsigned char* slot, Barrier& full) {
        load_backward_tensor<typename Cfg::Layout, Cfg::kChunks>(p, t, n, slot, full);
      },
      [&](const tile::TileCoords& t, const auto& tensors, int tid) BLOCKATTN_INLINE {
        if constexpr (Ring::kPrepared)  // a kernel without preparers names no element type here
          prepare_backward_tile<typename Cfg::Layout, Cfg::kRows, Cfg::kHeadDim, typename Cfg::Elem>(hooks, t, tensors,
                                                                                                     tid);
      },
      op);
}

}  // namespace blockattn::sm90
