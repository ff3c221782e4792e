// sm90 backward for 128-token blocks: both consumer warpgroups share each
// tile (one 128-token block of one head), in tensor_ring.cuh's frame.
//
// A 128 x 128 tile's S and dP would take one warpgroup 128 fp32 registers
// per thread each, so the two consumers split it. Consumer c owns
//   query rows [64c, 64c + 64):  S = Q_c K^T, dP = dO_c V^T (m64n128 wgmma),
//                                the softmax of those rows, P and dS rows to
//                                shared memory, dQ_c = scale dS_c K;
//   key rows [64c, 64c + 64):    dV_c = P[:, c]^T dO, dK_c = scale dS[:, c]^T Q
//                                (A = the key half of P^T / dS^T, read
//                                transposed from both consumers' rows).
// Within a consumer, warp w owns rows 64c + 16w .. + 16 of both kinds, so
// every row of the P and dS tiles is written, staged and stored by one warp,
// and one read of a rotary tile's angles serves its epilogues (all three at
// D = 64, dV's and dK's at 128).
// dQ_c, whose A operand is the consumer's own dS rows, is issued before the
// consumers meet over P and dS; dV and dK after the transposed reads.
//
// Tensors arrive one per ring slot in release order: V (free once S and dP
// are done), K (after dQ), dO (after dV), Q (after dK). The outputs leave
// through the P and dS tiles once every warp holds its transposed operands
// in registers: dQ and dK staged in P's, dV in dS's; at D = 64 (without
// preparers) a warp's 16 staged rows leave by TMA where they lie inside the
// block (kStoresByTma). Stores skip rows past the block end.
//
// With rotary at D = 64 the producer warpgroup's three spare warps rotate
// each tile's Q, K and V as they land (a prepared ring, tensor_ring.cuh):
// the ten slots hold two and a half tiles, so the rotation of the next
// tile runs under this one's products (shared_tile_prepares).
#pragma once

#include "common/opaque.cuh"
#include "sm90/backward_products.cuh"
#include "sm90/backward_tensors.cuh"
#include "sm90/stage_matrix.cuh"
#include "sm90/tma_store.cuh"
#include "sm90/wgmma.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// Whether the producer warpgroup's three spare warps prepare each tile (the
// rotary prologue) for the consumers, a tile or more ahead (a prepared
// ring, tensor_ring.cuh).
constexpr bool shared_tile_prepares(int head_dim, core::Fusion fusion) {
  return fusion == core::Fusion::kRotary && head_dim == 64;
}

template <typename T, int D, bool kPreparedTiles>
struct SharedTileBackwardConfig {
  using Elem = T;
  static constexpr int kHeadDim = D;
  static constexpr bool kPrepared = kPreparedTiles;
  static_assert(D % 64 == 0 && D <= 128,
                "whole 64-column chunks, and outputs of at most 128 columns (they are staged in the 128 x 128 P tile)");
  static constexpr int kRows = 128;  // query rows = key rows of a tile, and the TMA box rows
  static constexpr int kConsumers = 2;
  // Two neighbouring heads' tiles in a row, as in the column-split backward:
  // headline-d64 at 128-token blocks 83 -> 86-87% of copy (docs/perf.md,
  // "Neighbouring tiles on the tensor ring").
  static constexpr int kNeighbourTiles = 2;
  static constexpr int kOwnRows = kRows / kConsumers;  // query rows and key rows of one consumer
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kWaitsForPriorGrids = true;  // shared_tile_backward_kernel()'s first step
  static constexpr int kConsumerThreads = 128 * kConsumers;
  using Layout = tile::Chunked<kRows>;
  static_assert(tile_chunk_cols(Operation::kBackward, D) == tile::kChunkCols, "the host's maps write this layout");
  static constexpr int kChunks = D / tile::kChunkCols;
  static constexpr int kChunkBytes = Layout::kChunkBytes;
  static constexpr int kTensors = kBackwardTensors;
  static constexpr int kSlotBytes = kChunks * kChunkBytes;
  static constexpr int kProbTileBytes = kRows * kRows * 2;  // P or dS
  static constexpr int kScratchBytes = 2 * kProbTileBytes;
  // Every slot that fits beside the scratch in the 227 KB a CTA may have:
  // 5 at D = 128 (one tensor of the next tile loads while a tile starts),
  // 10 at D = 64.
  using Budget = TensorRingBudget<kSlotBytes, kScratchBytes, 0, kPrepared ? 3 : 2>;
  static constexpr int kSlots = Budget::kSlots;
  static_assert(kSlots > kTensors, "a tile's tensors and at least one of the next tile's");
  static constexpr int kSmemBytes = Budget::kSmemBytes;
  // 128 x 40 + 256 x 232 <= 64K: S and dP alone are 128 registers. With
  // preparers, 128 x 96 + 256 x 200: their rotation, with the next unit's
  // table words loaded ahead (tile::PrologueReads::kAhead), spills below 96
  // (36 bytes at 80, 192 at 56). At 200 ptxas serializes the consumers'
  // wgmma (C7512: it needs 224), and that cost less than spilled preparers:
  // with 56 + 224 the rotary backward ran 13% slower than with 80 + 200
  // with bf16 tables (docs/perf.md, "Session 58"; "Session 59" for 96).
  static constexpr uint32_t kProducerRegs = kPrepared ? 96 : 40, kConsumerRegs = kPrepared ? 200 : 232;
  // The consumers' thread index masked to its group (opaque_thread_index: no
  // signed division in the address arithmetic) measured faster at D = 128 and
  // slower at D = 64: headline-d64 backward 80.2 -> 82.6% of copy unmasked,
  // headline-d128 92.0 -> 91.1 (docs/perf.md, "A regression at 128-token
  // blocks, found by the sweep").
  static constexpr bool kMaskedThreadIndex = D >= 128;
  // dQ, dV and dK issued together, each written while the later ones run:
  // at D = 64 their accumulators (3 x 32) fit beside the A operands (3 x 32);
  // at D = 128 (3 x 64) they do not, and the three run one after another.
  static constexpr bool kOverlapOutputs = D == 64;
  // Outputs staged and stored through TMA (tma_store.cuh) where a warp's 16
  // rows lie inside the block, with plain stores where they pass its end:
  // at D = 64, headline-d64 backward 65.7-66.4 -> 67.6-67.7% of copy on an
  // H200, sustained (docs/perf.md, "Session 59", item 3). Not with
  // preparers: there the consumers spilled 120 bytes at 200 registers.
  static constexpr bool kStoresByTma = D == 64 && !kPrepared;
};

// The kernel's config: whether it prepares follows from the rest (shared_tile_prepares).
template <typename T, int D, core::Fusion F>
using SharedTileBackwardConfigOf = SharedTileBackwardConfig<T, D, shared_tile_prepares(D, F)>;

template <typename Cfg>
struct SharedTileBackwardSmem {
  using T = typename Cfg::Elem;
  using Ring = TensorRing<Cfg::kSlots, Cfg::kSlotBytes, Cfg::kPrepared>;
  Ring ring;
  T* probs;    // P [query][key], then the dQ and dK staging
  T* dscores;  // dS [query][key], then the dV staging

  __device__ explicit SharedTileBackwardSmem(unsigned char* raw) {
    ring.base = tile::align_shared_1024(raw);
    unsigned char* scratch = ring.base + Cfg::kSlots * Cfg::kSlotBytes;
    probs = reinterpret_cast<T*>(scratch);
    dscores = reinterpret_cast<T*>(scratch + Cfg::kProbTileBytes);
    ring.full = reinterpret_cast<Barrier*>(scratch + Cfg::kScratchBytes);
    ring.empty = ring.full + Cfg::kSlots;
    ring.ready = Cfg::kPrepared ? ring.empty + Cfg::kSlots : nullptr;
  }
};

template <typename Cfg, typename Hooks, typename Tensors>
__device__ __forceinline__ void shared_backward_tile(const Params& p, const Hooks& hooks,
                                                     const SharedTileBackwardSmem<Cfg>& sm, const tile::TileCoords& t,
                                                     const Tensors& in, int consumer) {
  using T = typename Cfg::Elem;
  constexpr int D = Cfg::kHeadDim;
  using Layout = typename Cfg::Layout;
  using ProbLayout = tile::SwizzledRows<Cfg::kRows>;
  constexpr int kRows = Cfg::kRows;
  const tile::RowScale one = tile::RowScale::uniform(1.f), scale = tile::RowScale::uniform(p.attn.softmax_scale);
  // Re-read every tile (common/opaque.cuh): hoisted out of the loop, the
  // offsets derived from the thread's position would spill.
  const int consumer_tid = Cfg::kMaskedThreadIndex ? opaque_thread_index<Cfg::kConsumers * 128>(128)
                                                   : opaque(static_cast<int>(threadIdx.x)) - 128;  // both consumers
  const int lane = consumer_tid % 32;
  const int row0 = consumer_tid / 32 * 16;  // = 64 consumer + 16 warp: its query rows and its key rows
  const int valid = t.block.row_count;
  T* const q = in.template data<T>(kTensorQ);
  T* const k = in.template data<T>(kTensorK);
  T* const v = in.template data<T>(kTensorV);
  T* const dout = in.template data<T>(kTensorDout);
  const uint32_t q_addr = operand_address(q), k_addr = operand_address(k);
  const uint32_t v_addr = operand_address(v), dout_addr = operand_address(dout);
  // This consumer's query rows of Q and dO: 64 rows of 128 bytes further into
  // each chunk, a multiple of the swizzle's 1024-byte period.
  const uint32_t own_rows = consumer * Cfg::kOwnRows * tile::kChunkRowBytes;

  begin_backward_tile<Layout, kRows, D, Cfg::kConsumerThreads, T>(hooks, t, in, consumer_tid);

  // S = Q_c K^T and dP = dO_c V^T; P (normalized; rows past the block end
  // zeroed) while dP's product runs, then dS, in place; then both to shared
  // memory for the other consumer's key half.
  tile::Accumulator<kRows> s, ds;
  issue_scores<T, kRows, D, Layout>(s, ds, q_addr + own_rows, dout_addr + own_rows, k_addr, v_addr);
  softmax_of_scores(s, ds, t.block, row0, p.attn.scale_log2, lane);
  in.release(kTensorV, lane);
  // The previous tile's outputs have left the P and dS tiles. A warp's staged
  // output rows (Layout: D columns a row) are not its P rows (128 columns a
  // row): consumer 1's dK and dV rows lie under consumer 0's P and dS rows
  // 32-63, and racecheck (LongWalks, CTAs walking many tiles) caught the
  // next tile's P landing there while the other warpgroup still stored them.
  named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);
  stage_rows_by_matrices<ProbLayout, T>(s, one, tile::smem_u32(sm.probs), row0, lane);
  stage_rows_by_matrices<ProbLayout, T>(ds, one, tile::smem_u32(sm.dscores), row0, lane);
  // dQ_c = dS_c K needs this warpgroup's own dS rows alone, in registers:
  // issued before the barrier, it runs under the wait for the other
  // consumer's rows and the transposed reads that follow.
  tile::OperandA<kRows> ds_rows = tile::to_operand<T>(ds);
  tile::Accumulator<D> dq;
  wgmma_fence();
  issue_rs_product<T, D, Layout>(dq, ds_rows, k_addr, false);
  wgmma_commit();
  named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);  // P and dS of all 128 rows are in place
  tile::OperandA<kRows> p_keys = transposed_rows<T, kRows, kRows>(sm.probs, row0, lane);
  tile::OperandA<kRows> ds_keys = transposed_rows<T, kRows, kRows>(sm.dscores, row0, lane);
  // Every warp holds its P^T and dS^T rows: the P and dS tiles may take the
  // staged outputs (no warp reads another's rows of them any more).
  named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);

  // Each output through its epilogue, staged in the warp's rows of a dead
  // tile: dQ_c = scale dS_c K and dK_c = scale dS[:, c]^T Q in P's, dV_c =
  // P[:, c]^T dO in dS's. Each first hands back the tensor that its product
  // was the last to read.
  auto write = [&](const tile::Accumulator<D>& acc, const tile::RowScale& factor, T* staging, const TensorView& out,
                   const CUtensorMap& map, int head) BLOCKATTN_INLINE {
    if constexpr (Cfg::kStoresByTma) {
      stage_rows_by_matrices<Layout, T>(acc, factor, tile::smem_u32(staging), row0, lane);
      store_staged_rows<Layout, D, kRowWalk>(map, staging, out, t.block, head, 0, row0, lane);
    } else {
      write_rows_by_matrices<Layout, T, D, D, kRowWalk>(
          acc, factor, staging, row0, tile::head_rows_out<T>(out, t.block, head), out.token_stride, valid, lane);
    }
  };
  auto write_dq = [&](tile::Accumulator<D>& dq, const auto& angles) BLOCKATTN_INLINE {
    in.release(kTensorK, lane);
    hooks.epilogue(tile::Output::kDq, dq, t, row0, 0, lane, angles);
    write(dq, scale, sm.probs, p.dq, p.dq_map, t.q_head);
  };
  auto write_dv = [&](tile::Accumulator<D>& dv, const auto& angles) BLOCKATTN_INLINE {
    in.release(kTensorDout, lane);
    hooks.epilogue(tile::Output::kDv, dv, t, row0, 0, lane, angles);
    write(dv, one, sm.dscores, p.dv, p.dv_map, t.kv_head);
  };
  auto write_dk = [&](tile::Accumulator<D>& dk, const auto& angles) BLOCKATTN_INLINE {
    in.release(kTensorQ, lane);
    hooks.epilogue(tile::Output::kDk, dk, t, row0, 0, lane, angles);
    // Every lane's dQ stores, or the TMA unit, have read the staged rows dK
    // overwrites.
    if constexpr (Cfg::kStoresByTma)
      wait_store_reads(lane);
    else
      __syncwarp();
    write(dk, scale, sm.probs, p.dk, p.dk_map, t.kv_head);
  };
  if constexpr (Cfg::kOverlapOutputs) {
    tile::Accumulator<D> dv, dk;
    wgmma_fence();
    issue_rs_product<T, D, Layout>(dv, p_keys, dout_addr, false);
    wgmma_commit();
    issue_rs_product<T, D, Layout>(dk, ds_keys, q_addr, false);
    wgmma_commit();
    wgmma_wait<2>();
    fence_rs_product(dq, ds_rows);
    // The three epilogues' table values (rotary), loaded once for the
    // warp's rows while dV's and dK's products run (tile/rotary.cuh), once
    // dS's registers are free: beside them they spilled (RowAngles, and a
    // 16-bit table's packed words too). dQ leaves once dV's product is
    // done, its table values landed. Packed words are unpacked only there,
    // so their loads stall nothing before it.
    const auto packed = hooks.template packed_row_angles<D>(t, row0, lane);
    auto write_outputs = [&](const auto& angles) BLOCKATTN_INLINE {
      wgmma_wait<1>();
      write_dq(dq, angles);
      fence_rs_product(dv, p_keys);
      write_dv(dv, angles);
      wgmma_wait<0>();
      fence_rs_product(dk, ds_keys);
      write_dk(dk, angles);
    };
    // The fp32 path's tail first in the code, as it was before the packed
    // one came: second, it ran 1-2.5% slower with the same instructions
    // (docs/perf.md, "Session 54", item 4).
    if (!packed.loaded)
      write_outputs(hooks.template row_angles<D>(t, row0, lane));
    else
      write_outputs(packed);
  } else {
    // A 16-bit table's angles, packed (32 registers), loaded while dQ's
    // product runs, so that its epilogue does not wait on them (it did: dQ's
    // wait and epilogue held 29% of the D = 128 rotary kernel's stall
    // samples, 42% of those on these loads; docs/perf.md "Session 54"). An
    // fp32 table's (RowAngles, 64) do not fit beside dQ and the transposed
    // operands: dQ's epilogue reads its own, and dV's and dK's are loaded
    // under dV's product.
    const auto packed = hooks.template packed_row_angles<D>(t, row0, lane);
    wgmma_wait<0>();
    fence_rs_product(dq, ds_rows);
    write_dq(dq, packed);
    tile::Accumulator<D> dv;
    wgmma_fence();
    issue_rs_product<T, D, Layout>(dv, p_keys, dout_addr, false);
    wgmma_commit();
    auto write_dv_dk = [&](const auto& angles) BLOCKATTN_INLINE {
      wgmma_wait<0>();
      fence_rs_product(dv, p_keys);
      write_dv(dv, angles);
      tile::Accumulator<D> dk;
      wgmma_rs_tile<T, D, Layout>(dk, ds_keys, q_addr);
      write_dk(dk, angles);
    };
    // The fp32 path's tail first, as above.
    if (!packed.loaded)
      write_dv_dk(hooks.template row_angles<D>(t, row0, lane));  // under dV's product
    else
      write_dv_dk(packed);
  }
  // The TMA unit has read the warp's staged rows before the next tile's P
  // or dS lands there (after the consumers' barrier), and before the CTA
  // exits.
  if constexpr (Cfg::kStoresByTma) wait_store_reads(lane);
}

template <typename T, int D, core::Fusion F>
__global__ void __launch_bounds__(SharedTileBackwardConfigOf<T, D, F>::kThreads, 1)
    shared_tile_backward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // launched overlapping the schedule kernel (schedule/programmatic_launch.cuh)
  using Cfg = SharedTileBackwardConfigOf<T, D, F>;
  extern __shared__ unsigned char smem_raw[];
  const SharedTileBackwardSmem<Cfg> sm(smem_raw);
  const tile::Hooks<F> hooks(p.attn);
  run_backward_tensor_ring<Cfg>(p, sm.ring, hooks,
                                [&](const tile::TileCoords& t, const auto& tensors, int consumer) BLOCKATTN_INLINE {
                                  shared_backward_tile<Cfg>(p, hooks, sm, t, tensors, consumer);
                                });
}

}  // namespace blockattn::sm90
