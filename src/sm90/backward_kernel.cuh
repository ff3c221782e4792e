// sm90 backward kernel: the forward's frame (persistent, warp-specialized TMA
// pipeline) with the five products of the backward on wgmma.
//
// Tiles are (block, head) with Hq == Hkv; a consumer's 232 registers
// (setmaxnreg; 152 with the third consumer at D = 64) hold one head's
// products. Grouped-query heads, and at D = 64 and 128 batches of a few
// blocks per sequence, run on the grouped kernel instead
// (grouped_backward.cuh: the rows' Grouped and FewBlocks variants below).
//
//   loader:  TMA copies of Q, K, V and dO of the tile;
//   tile op: backward_tile, per consumer warpgroup (warp w owns query rows and
//            key rows [16w, 16w + 16)):
//     S = Q K^T, dP = dO V^T        wgmma, both operands K-major in shared memory
//     P = softmax(S), dS = P (dP - rowsum(P dP))   fp32 registers (tile/softmax.cuh)
//     P, dS -> shared memory, read back transposed (ldmatrix.trans) as A operands
//     dV = P^T dO, dK = dS^T Q      wgmma, A from registers, B MN-major
//     dQ = scale dS K               wgmma, A = dS from registers, 64 columns at a time
// dV leaves through the tile's V buffer, dQ through dO, dK through K, each
// once no warp reads that buffer any more (which orders the products dV, dQ,
// dK and keeps one accumulator live at a time). Stores skip rows past the
// block end.
#pragma once

#include <type_traits>

#include "common/kernel_launcher.cuh"
#include "common/opaque.cuh"
#include "sm90/backward_products.cuh"
#include "sm90/frame.cuh"
#include "sm90/loader.cuh"
#include "sm90/params.h"
#include "sm90/stage_matrix.cuh"
#include "sm90/wgmma.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// Where dS is staged for dK's transposed operand: in a scratch tile of its
// own beside P's, or in the tile's V buffer once dV has left it. The second
// frees 8 KB per consumer, which at D = 64 makes 6 stages, two per consumer,
// out of 5 shared by three. Measured (docs/perf.md, "dS in V's buffer"): on
// short sequences it gains ~1 point (tail-d64 79.7-81.7% of copy against
// 79.5-79.8%), on long ones it loses one (headline-d64 82.8-82.9% against
// 83.4-83.8%), and at D = 128 it changed nothing; so only the D = 64 kernel
// for short sequences takes it.
constexpr bool stage_ds_in_v(int head_dim, BatchKind kind) { return head_dim == 64 && kind == BatchKind::kShort; }

// The config's bool: the kernel for batches of short sequences, where it
// differs from the long one: dS in V's buffer (D = 64), row boxes (D = 64
// and 128: backward_row_boxes_kernel, params.h).
constexpr bool short_sequences_kernel_differs(int head_dim) {
  return stage_ds_in_v(head_dim, BatchKind::kShort) || backward_row_boxes_kernel(head_dim, BatchKind::kShort);
}

// kStagedAngles: the rotary prologue's table rows come staged
// (backward_stages_angles; the row's StagedTables kernel), which takes dS's
// staging into V's buffer to make room for the slots.
template <typename T, int D, int B, bool kShortKernel, bool kStagedAngles = false>
struct BackwardConfig {
  static_assert(B == 64, "one m64 wgmma row block per tile: the tile is one 64-token block");
  static constexpr int kRows = B;  // query rows and key rows of a tile, and the TMA box rows
  static constexpr int kKeys = B;  // key columns of S, dP, dS
  using Layout = tile::Chunked<kRows, tile_chunk_cols(Operation::kBackward, D)>;
  // At D = 64 a tile has half the bytes but the same 64 x 64 softmax work, so
  // a third consumer warpgroup hides the other two's latency.
  static constexpr int kConsumers = D <= 64 ? 3 : 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kWaitsForPriorGrids = true;  // backward_kernel()'s first step
  // Exact 32-column chunks where D is not a multiple of 64 (D = 32, 96, 160;
  // tile_chunk_cols in params.h), so kPaddedD == D here; the padding below
  // serves layouts whose chunks overshoot D (TMA reads zeros past column D,
  // the products over D sum the real columns only, and only D columns are
  // stored).
  static constexpr int kChunkCols = Layout::kChunkColumns;
  static constexpr int kChunks = (D + kChunkCols - 1) / kChunkCols;
  static constexpr int kPaddedD = kChunks * kChunkCols;
  static constexpr int kChunkBytes = Layout::kChunkBytes;
  static constexpr int kTileBytes = kChunks * kChunkBytes;  // one of Q, K, V, dO
  static constexpr int kStageBytes = 4 * kTileBytes;
  static constexpr int kProbTileBytes = kRows * kKeys * 2;  // P or dS
  static constexpr bool kDsInV = (kShortKernel && stage_ds_in_v(D, BatchKind::kShort)) || kStagedAngles;
  static constexpr bool kStagesAngles = kStagedAngles;
  static_assert(!kDsInV || kTileBytes >= kProbTileBytes, "dS fits in V's buffer");
  static constexpr int kScratchBytes = (kDsInV ? 1 : 2) * kProbTileBytes;  // per consumer
  // 192 KB of tiles: 3 stages at D = 128; at D = 64, 5 (160 KB beside three
  // consumers' P and dS scratch), or 6 (two per consumer) with dS in V's
  // buffer; at D = 32, 10; at D = 96, 4 (two per consumer); at D = 160 and
  // 192, 2 (one per consumer: one's next tile lands while the other
  // computes; at D = 192, with the scratch, 225 KB of the 227 KB a CTA may
  // have). Past 192 columns a stage is 128 KB and only one fits: no kernel
  // there.
  // (Staged angles keep 5 at D = 64: the third consumer's 32 KB go to the
  // three consumers' slots and their scratch.)
  static constexpr int kStages =
      (kConsumers == 3 && (!kDsInV || kStagedAngles) ? 160 * 1024 : 192 * 1024) / kStageBytes;
  static constexpr int kSmemBytes =
      1024 /* alignment slack */ + kStages * kStageBytes + kConsumers * kScratchBytes + 2 * kStages * 8;
  // 128 x 40 + 256 x 232 <= 64K with two consumers, 128 x 40 + 384 x 152 with three.
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = kConsumers == 3 ? 152 : 232;
  static constexpr bool kEmptyEntries = true;  // the tiles table: sequences packed into an earlier tile
  // Every thread releases: the tile op touches the stage across warps
  // (zeroed rows, dS^T in V's buffer; frame.cuh says what racecheck saw).
  static constexpr bool kReleasePerThread = true;
  // Where a head's rows are 320 or 384 bytes, the CTA takes a tile per
  // consumer of neighbouring heads at a time (frame.cuh's cta_tile), their
  // row pieces loaded together: headdim-d160-h3 79.0 -> 84.4-84.9% of copy,
  // headdim-d192-h3 86.1 -> 89.8-90.2 (H100). At D = 64 and 128 it lost
  // tail-d64 6.5 points and tail-d128 3, and gained headline-d128 0.4
  // (docs/perf.md, "Neighbouring tiles together in the sm_90 frame").
  static constexpr int kNeighbourTiles = D == 160 || D == 192 ? kConsumers : 1;
  static constexpr int kConsumersPerSlot = 1;  // a slot is one tile (frame.cuh)
  // Whether the inputs may come in boxes of Params::input_box_rows rows (the
  // short-sequence kernels: backward_row_boxes_kernel, params.h).
  static constexpr bool kRowBoxes = kShortKernel && backward_row_boxes_kernel(D, BatchKind::kShort);
};

template <typename T, int D, int B, bool S, bool A = false>
struct BackwardSmem {
  using Cfg = BackwardConfig<T, D, B, S, A>;
  unsigned char* tiles;
  unsigned char* scratch;
  Barrier* full;
  Barrier* empty;

  __device__ explicit BackwardSmem(unsigned char* raw) {
    tiles = tile::align_shared_1024(raw);
    scratch = tiles + Cfg::kStages * Cfg::kStageBytes;
    full = reinterpret_cast<Barrier*>(scratch + Cfg::kConsumers * Cfg::kScratchBytes);
    empty = full + Cfg::kStages;
  }
  __device__ T* q(int stage) const { return reinterpret_cast<T*>(tiles + stage * Cfg::kStageBytes); }
  __device__ T* k(int stage) const { return q(stage) + Cfg::kTileBytes / 2; }
  __device__ T* v(int stage) const { return q(stage) + Cfg::kTileBytes; }
  __device__ T* dout(int stage) const { return q(stage) + 3 * Cfg::kTileBytes / 2; }
  __device__ T* probs(int consumer) const { return reinterpret_cast<T*>(scratch + consumer * Cfg::kScratchBytes); }
  // dS's staging: V's buffer once dV has left it (Cfg::kDsInV), else the
  // consumer's second scratch tile.
  __device__ T* dscores(int stage, int consumer) const {
    if constexpr (Cfg::kDsInV) return v(stage);
    return probs(consumer) + Cfg::kProbTileBytes / 2;
  }
};

// The per-tile backward's slots of staged rotary table rows
// (backward_stages_angles): the CTA's tile n takes slot n % kSlots, which
// the producer fills once the slot's previous tile, n - kSlots, has
// released it (`empty`: 128 arrivals, the prologue's consumer threads).
// Tile n's consumer waits for that release, then for the fill
// (wait_for_fill_in_turn, sm90/sync.cuh).
//   D = 128: one slot, the two consumers' tiles in turn (16 KB, freed by dS
//            in V's buffer);
//   D = 64:  a slot per consumer (consume_tiles gives consumer c the tiles
//            c + 3j), so that no consumer's prologue waits for another's:
//            with one slot in tile order the producer held each tile's
//            copies for the previous tile's prologue (1.47x the plain
//            backward, docs/perf.md, "Session 44").
// In dynamic shared memory after the ring's barriers.
template <typename Cfg>
struct BackwardAngleSlots {
  // One slot in turn serves two consumers at most (wait_for_fill_in_turn,
  // sm90/sync.cuh; the kernel asserts it).
  static constexpr int kSlots = Cfg::kConsumers == 3 ? 3 : 1;
  static constexpr int kTableRows = Cfg::kRows;
  static constexpr int kTableBytes = kTableRows * (Cfg::kPaddedD / 2) * 2;  // one table's rows, 16-bit, r <= D
  static constexpr int kSlotBytes = 2 * kTableBytes;                        // cos rows, then sin rows
  static constexpr int kUsedBytes =
      Cfg::kStages * Cfg::kStageBytes + Cfg::kConsumers * Cfg::kScratchBytes + 2 * Cfg::kStages * 8;  // BackwardSmem's
  static constexpr int kOffset = (kUsedBytes + 127) / 128 * 128;
  static constexpr int kExtraSmemBytes = kOffset + kSlots * (kSlotBytes + 2 * 8) - kUsedBytes;
  unsigned char* rows;  // slot s: rows + s * kSlotBytes
  Barrier* full;        // full[s], producer -> consumer: the slot's rows have landed
  Barrier* empty;       // empty[s], consumer -> producer: the slot's tile's prologue is past its reads

  __device__ explicit BackwardAngleSlots(unsigned char* tiles)
      : rows(tiles + kOffset), full(reinterpret_cast<Barrier*>(rows + kSlots * kSlotBytes)), empty(full + kSlots) {}
  __device__ unsigned char* cos_rows(int slot) const { return rows + slot * kSlotBytes; }
  __device__ unsigned char* sin_rows(int slot) const { return cos_rows(slot) + kTableBytes; }
  // The CTA's n-th tile's slot, and that slot's use count before it.
  __device__ static int slot_of(int n) { return n % kSlots; }
  __device__ static uint32_t use_of(int n) { return static_cast<uint32_t>(n / kSlots); }
};
struct NoBackwardAngleSlots {
  __device__ explicit NoBackwardAngleSlots(unsigned char*) {}
};

// The per-tile backward's launch config: its own, plus the slots where it
// stages angles.
template <typename Cfg>
struct BackwardLaunchConfig : Cfg {
  static constexpr int kSmemBytes =
      Cfg::kSmemBytes + (Cfg::kStagesAngles ? BackwardAngleSlots<Cfg>::kExtraSmemBytes : 0);
};

// `slots`: BackwardAngleSlots where the kernel stages the prologue's angles
// (then `tile_index` is the CTA's index of this tile), else
// NoBackwardAngleSlots.
template <typename T, int D, int B, bool S, bool A, typename Hooks, typename Slots>
__device__ __forceinline__ void backward_tile(const Params& p, const Hooks& hooks,
                                              const BackwardSmem<T, D, B, S, A>& sm, const tile::TileCoords& t,
                                              int stage, int consumer, const Slots& slots, int tile_index) {
  using Cfg = BackwardConfig<T, D, B, S, A>;
  using Layout = typename Cfg::Layout;
  using ProbLayout = tile::SwizzledRows<Cfg::kKeys>;
  constexpr int kRows = Cfg::kRows, kKeys = Cfg::kKeys, kPaddedD = Cfg::kPaddedD;
  const uint32_t barrier_id = 1 + consumer;
  T* probs_tile = sm.probs(consumer);
  T* dscores_tile = sm.dscores(stage, consumer);
  const tile::RowScale one = tile::RowScale::uniform(1.f), scale = tile::RowScale::uniform(p.attn.softmax_scale);
  // Re-read every tile (common/opaque.cuh): hoisted out of the loop, the
  // offsets derived from the thread's position would spill.
  const int tid = opaque_thread_index<128>(128 * (1 + consumer));
  const int lane = tid % 32, row0 = 16 * (tid / 32);
  const int valid = t.block.row_count;
  struct {
    T *q, *k, *v, *dout;
  } ops{sm.q(stage), sm.k(stage), sm.v(stage), sm.dout(stage)};
  const uint32_t q_addr = operand_address(ops.q), k_addr = operand_address(ops.k);
  const uint32_t v_addr = operand_address(ops.v), dout_addr = operand_address(ops.dout);
  // dV and dK's way out: staged in the warp's rows of a tile no product
  // reads any more, then stored (D columns of the padded rows).
  auto write = [&](const tile::Accumulator<kPaddedD>& acc, const tile::RowScale& factor, T* staging,
                   const TensorView& out, int head) BLOCKATTN_INLINE {
    stage_rows_by_matrices<Layout, T>(acc, factor, tile::smem_u32(staging), row0, lane);
    __syncwarp();
    store_staged_rows_walked<Layout, D>(p.stepped_stores, staging, row0, tile::head_rows_out<T>(out, t.block, head),
                                        out.token_stride, valid, lane);
  };
  if (valid < kRows) {  // every product must see zeros past the block end
    tile::zero_rows_from<Layout, kRows, D, 128>(ops.q, valid, tid);
    tile::zero_rows_from<Layout, kRows, D, 128>(ops.k, valid, tid);
    tile::zero_rows_from<Layout, kRows, D, 128>(ops.v, valid, tid);
    tile::zero_rows_from<Layout, kRows, D, 128>(ops.dout, valid, tid);
  }
  // Where the rows are staged, the epilogues' angles are read from them
  // too, before the slot goes back (tile::PackedRowAngles).
  constexpr bool kStaged = !std::is_same_v<Slots, NoBackwardAngleSlots>;
  std::conditional_t<kStaged, tile::PackedRowAngles<kPaddedD>, tile::NoRowAngles> staged_angles{};
  if constexpr (!kStaged) {
    hooks.template prologue<Layout, kRows, D, 128>(t, tid, ops.q, ops.k, ops.v);
  } else if (p.staged_angles) {
    const int slot = Slots::slot_of(tile_index);
    const uint32_t use = Slots::use_of(tile_index);
    wait_for_fill_in_turn(slots.full[slot], slots.empty[slot], use);
    // The rows were copied as one range from the block's first position: a
    // tile packing several sequences with in-sequence positions (the
    // backward's tiles table packs short ones) reads the table itself.
    if (hooks.positions_follow_rows(t)) {
      const tile::StagedAngles rows{slots.cos_rows(slot), slots.sin_rows(slot), t.first_position};
      hooks.template prologue<Layout, kRows, D, 128>(t, tid, ops.q, ops.k, ops.v, rows);
      staged_angles = hooks.template staged_row_angles<kPaddedD>(t, row0, lane, rows);
    } else {
      hooks.template prologue<Layout, kRows, D, 128>(t, tid, ops.q, ops.k, ops.v);  // staged_angles: not loaded
    }
  } else {
    hooks.template prologue<Layout, kRows, D, 128>(t, tid, ops.q, ops.k, ops.v);
  }
  static_assert(!kStaged || Hooks::kModifiesOperands, "the staged slot goes back after the fence below");
  if (valid < kRows || Hooks::kModifiesOperands) {
    fence_async_shared();  // generic writes, read next by wgmma (async proxy)
    // The thread's reads of the staged slot are done (or skipped), and
    // complete: the fence (MEMBAR.ALL.CTA) waits for them. Handed back
    // before it, the slot went to the producer's copy of a later tile's rows
    // while staged_row_angles' loads, which feed only the epilogues, were
    // still outstanding (the SYNCS.ARRIVE waited on no scoreboard): one
    // row's angles came from a later tile in dQ, dK and dV, about one run
    // in fourteen (KernelTest's determinism check; docs/perf.md, "Session 56").
    if constexpr (kStaged) {
      if (p.staged_angles) slots.empty[Slots::slot_of(tile_index)].arrive();
    }
    named_barrier_sync(barrier_id, 128);
  }

  // S = Q K^T and dP = dO V^T.
  tile::Accumulator<kKeys> s, ds;
  wgmma_fence();
  issue_ss_product<T, kKeys, D, Layout>(s.regs(), q_addr, k_addr);
  issue_ss_product<T, kKeys, D, Layout>(ds.regs(), dout_addr, v_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(s.regs());
  fence_registers(ds.regs());

  // P (normalized; rows past the block end zeroed) and dS, in place.
  float row_sum[2];
  tile::exp_rows_in_tile(s, t.block, row0, p.attn.scale_log2, row_sum, lane);
  tile::softmax_grad_rows(s, ds, tile::inverse_valid_rows(row_sum, row0, valid, lane));
  stage_rows_by_matrices<ProbLayout, T>(s, one, tile::smem_u32(probs_tile), row0, lane);
  if constexpr (!Cfg::kDsInV) stage_rows_by_matrices<ProbLayout, T>(ds, one, tile::smem_u32(dscores_tile), row0, lane);
  tile::OperandA<kKeys> ds_op = tile::to_operand<T>(ds);
  named_barrier_sync(barrier_id, 128);  // P (and dS) of all rows are in place; S and dP are done with V

  // The three epilogues' table values for the warp's rows (rotary), loaded
  // once, while dV's product runs (tile/rotary.cuh, row_angles). H100,
  // headline-d64, rotary over plain backward: 1.29-1.30x -> 1.16x (fp32
  // tables), 1.24-1.25x -> 1.17-1.18x (bf16). At D = 128 the same (64 angles
  // a thread) read 1.32-1.34x -> 1.38x, so only D = 64 takes them (the other
  // head dims are not measured); at D = 128 the staged rows give them,
  // packed 16-bit, half the registers (tile::PackedRowAngles).
  const auto angles = [&] {
    if constexpr (kStaged)
      return staged_angles;
    else if constexpr (D == 64)
      return hooks.template row_angles<kPaddedD>(t, row0, lane);
    else
      return tile::NoRowAngles{};
  }();
  // dV = P^T dO, staged in this warp's key rows of V.
  {
    tile::OperandA<kRows> pt = transposed_rows<T, kRows, kKeys>(probs_tile, row0, lane);
    tile::Accumulator<kPaddedD> dv;
    wgmma_rs_tile<T, kPaddedD, Layout>(dv, pt, dout_addr);
    hooks.epilogue(tile::Output::kDv, dv, t, row0, 0, lane, angles);
    write(dv, one, ops.v, p.dv, t.kv_head);
  }

  // No warp's dV product reads dO any more, nor its dV rows in V: dQ is
  // staged in dO, and dS (kDsInV) in V.
  named_barrier_sync(barrier_id, 128);
  if constexpr (Cfg::kDsInV) stage_operand_matrices<ProbLayout>(ds_op, tile::smem_u32(dscores_tile), row0, lane);

  // dQ = scale dS K, a 64-column chunk at a time (B = one chunk of K; fewer
  // live registers), or whole rows where the epilogue needs them and where
  // the chunks are 32 columns (D = 96, 160: one product of N = D instead of
  // three or five of N = 32).
  constexpr bool kNarrowChunks = Cfg::kChunkCols == tile::kNarrowChunkCols;
  constexpr int kDqCols = Hooks::kWholeRows || kNarrowChunks ? kPaddedD : Cfg::kChunkCols;
#pragma unroll
  for (int c = 0; c < kPaddedD / kDqCols; ++c) {
    tile::Accumulator<kDqCols> dq;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      fence_registers(ds_op.a[kk]);
      wgmma_rs<T, kDqCols>(dq.regs(), ds_op.a[kk],
                           mnmajor_desc<Layout>(k_addr + c * (kDqCols / Cfg::kChunkCols) * Cfg::kChunkBytes, kk),
                           kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(dq.regs());
    hooks.epilogue(tile::Output::kDq, dq, t, row0, c * kDqCols, lane, angles);
    stage_rows_by_matrices<Layout, T>(dq, scale, tile::smem_u32(ops.dout), row0, lane, c * kDqCols);
  }
  __syncwarp();
  store_staged_rows_walked<Layout, D>(p.stepped_stores, ops.dout, row0, tile::head_rows_out<T>(p.dq, t.block, t.q_head),
                                      p.dq.token_stride, valid, lane);
  // dS^T of this warp's key rows. In the consumer's own scratch it is read
  // before the barrier below: the next tile's dS rows land there only after
  // it, so no warp's staging can overwrite rows another warp is still reading
  // (compute-sanitizer racecheck reported exactly that when this load came
  // after the barrier). In V's buffer it is read after the barrier, which is
  // the one that has every warp's dS rows staged; the buffer is next written
  // by TMA, after every warp has released the stage.
  tile::OperandA<kRows> dst;
  if constexpr (!Cfg::kDsInV) dst = transposed_rows<T, kRows, kKeys>(dscores_tile, row0, lane);
  named_barrier_sync(barrier_id, 128);  // no warp's dQ product reads K any more: dK is staged there
  if constexpr (Cfg::kDsInV) dst = transposed_rows<T, kRows, kKeys>(dscores_tile, row0, lane);

  // dK = scale dS^T Q.
  {
    tile::Accumulator<kPaddedD> dk;
    wgmma_rs_tile<T, kPaddedD, Layout>(dk, dst, q_addr);
    hooks.epilogue(tile::Output::kDk, dk, t, row0, 0, lane, angles);
    write(dk, scale, ops.k, p.dk, t.kv_head);
  }
}

// kStagedAngles: the row's StagedTables kernel, which the host launches
// where it encoded the tables' row maps (Params::staged_angles).
template <typename T, int D, int B, core::Fusion F, bool S, bool kStagedAngles = false>
__global__ void __launch_bounds__(BackwardConfig<T, D, B, S>::kThreads, 1)
    backward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // launched overlapping the schedule kernel (schedule/programmatic_launch.cuh)
  static_assert(!kStagedAngles || backward_stages_angles(D, F, S), "backward_stages_angles names the staging kernels");
  using Cfg = BackwardConfig<T, D, B, S, kStagedAngles>;
  extern __shared__ unsigned char smem_raw[];
  const BackwardSmem<T, D, B, S, kStagedAngles> sm(smem_raw);
  const tile::Hooks<F> hooks(p.attn);
  const int num_tiles = p.attn.schedule.block_count() * p.attn.num_q_heads;  // Hq == Hkv
  tile::QueryHeadWalk<F> coords_of(p.attn);                                  // the producer's alone

  using Slots = std::conditional_t<kStagedAngles, BackwardAngleSlots<Cfg>, NoBackwardAngleSlots>;
  const Slots slots(sm.tiles);
  if constexpr (kStagedAngles) {
    static_assert(BackwardLaunchConfig<Cfg>::kSmemBytes + 512 <= 227 * 1024,
                  "the angle slots do not fit beside the ring and the published tiles");
    static_assert(Slots::kSlots == Cfg::kConsumers || Cfg::kConsumers == 2,
                  "a slot per consumer, or one for two in turn");
    if (threadIdx.x == 0) {
      for (int s = 0; s < Slots::kSlots; ++s) {
        slots.full[s].init(1);
        slots.empty[s].init(128);
      }
    }
  }
  int angle_fills = 0;     // the producer's: the slots' fills so far
  int consumer_tiles = 0;  // a consumer thread's: its tiles so far
  // (The host launches this kernel only with the maps encoded; the check
  // keeps a mismatch from reading slots no copy fills.)
  const bool staged = kStagedAngles && p.staged_angles;
  run_frame<Cfg>(
      sm.full, sm.empty, num_tiles, p.attn.schedule.claims,
      [&](int tile) BLOCKATTN_INLINE {
        // Where the rows are staged the producer needs the block's first
        // table row for their copy, and publishes it.
        tile::TileCoords t = coords_of(tile);
        if (staged) t = hooks.look_ahead(t);
        return t;
      },
      [&](const tile::TileCoords& t) BLOCKATTN_INLINE { return staged ? t : hooks.look_ahead(t); },
      [&](const tile::TileCoords& t, int stage, Barrier& full) BLOCKATTN_INLINE {
        const TmaTile tiles[4] = {{&p.q_map, t.q_head, sm.q(stage)},
                                  {&p.k_map, t.kv_head, sm.k(stage)},
                                  {&p.v_map, t.kv_head, sm.v(stage)},
                                  {&p.dout_map, t.q_head, sm.dout(stage)}};
        // Whole tiles, or (kRowBoxes) the boxes that cover a packed tile's rows.
        const int rows = Cfg::kRowBoxes ? rows_in_boxes(t.block.row_count, p.input_box_rows) : Cfg::kRows;
        full.arrive_expect_tx(Cfg::kStageBytes / Cfg::kRows * rows);  // rows past T are zero-filled but counted
        if constexpr (Cfg::kRowBoxes) {
          load_block_rows<typename Cfg::Layout, Cfg::kChunks>(tiles, t.block.row_begin, rows, p.input_box_rows, full);
        } else {
          load_block_tiles<typename Cfg::Layout, Cfg::kChunks>(tiles, t.block.row_begin, full);
        }
        if constexpr (kStagedAngles) {
          if (staged) {
            const int slot = Slots::slot_of(angle_fills);
            const uint32_t use = Slots::use_of(angle_fills++);
            if (use > 0) slots.empty[slot].wait((use - 1) & 1u);
            load_table_rows<Cfg::kRows>(&p.cos_map, &p.sin_map, static_cast<int32_t>(t.first_position),
                                        p.attn.rotary.half, slots.cos_rows(slot), slots.sin_rows(slot),
                                        slots.full[slot]);
          }
        }
      },
      [&](const tile::TileCoords& t, int stage, int consumer) BLOCKATTN_INLINE {
        // This consumer's j-th tile is the CTA's tile consumer + kConsumers j (consume_tiles).
        backward_tile<T, D, B, S, kStagedAngles>(p, hooks, sm, t, stage, consumer, slots,
                                                 consumer + Cfg::kConsumers * consumer_tiles++);
      });
}

}  // namespace blockattn::sm90

#include "sm90/column_split_backward.cuh"
#include "sm90/grouped_backward.cuh"
#include "sm90/shared_tile_backward.cuh"

// The kernel table's sm90 backward rows: at 64-token blocks a tile per
// consumer warpgroup, except for the widest heads, whose tiles both consumers
// share by output columns; at 128-token blocks one tile shared by both, by
// rows. Rows where sm90::grouped_backward_kernel() holds carry the
// grouped-query kernel as their `Grouped` variant, and as their `FewBlocks`
// variant the same kernel with a group of one (at D = 64 its consumers take
// alternate units); at D = 64 also as `ManyBlocks`, the alternate units on
// walks of their own. Rotary rows at D = 64 and 128 carry as `StagedTables`
// the long kernel that stages 16-bit tables' rows (backward_stages_angles).
namespace blockattn {
namespace sm90 {
template <typename T, int D, core::Fusion F, GroupedForm kForm>
struct GroupedBackwardForm {
  using Config = GroupedBackwardConfig<T, D, kForm>;
  static constexpr auto kernel = grouped_backward_kernel<T, D, F, kForm>;
};
template <typename T, int D, int B, core::Fusion F,
          bool = (many_blocks_min_x2(Operation::kBackward, D, B, F == core::Fusion::kRotary) > 0)>
struct ManyBlocksFormOf {};
template <typename T, int D, int B, core::Fusion F>
struct ManyBlocksFormOf<T, D, B, F, true> {
  using ManyBlocks = GroupedBackwardForm<T, D, F, GroupedForm::kManyBlocks>;
};
template <typename T, int D, int B, core::Fusion F, bool = grouped_backward_kernel(D, B, F == core::Fusion::kRotary)>
struct GroupedBackwardOf {};
template <typename T, int D, int B, core::Fusion F>
struct GroupedBackwardOf<T, D, B, F, true> : ManyBlocksFormOf<T, D, B, F> {
  static_assert(few_blocks_limit_x2(Operation::kBackward, D, B, F == core::Fusion::kRotary) > 0,
                "core::batch_kind() names the batches of a few blocks that FewBlocks serves");
  using Grouped = GroupedBackwardForm<T, D, F, GroupedForm::kGroups>;
  using FewBlocks = GroupedBackwardForm<T, D, F, GroupedForm::kFewBlocks>;
};
template <typename T, int D, int B, core::Fusion F, bool = backward_stages_angles(D, F, false)>
struct StagedTablesBackwardOf {};
template <typename T, int D, int B, core::Fusion F>
struct StagedTablesBackwardOf<T, D, B, F, true> {
  // The long kernel staging 16-bit tables' rows (Params::staged_angles).
  struct StagedTables {
    using Config = BackwardLaunchConfig<BackwardConfig<T, D, B, false, true>>;
    static constexpr auto kernel = backward_kernel<T, D, B, F, false, true>;
  };
};
}  // namespace sm90

template <typename T, int D, int B, core::Fusion F>
struct KernelOf<sm90::Params, Operation::kBackward, T, D, B, F> : sm90::GroupedBackwardOf<T, D, B, F>,
                                                                  sm90::StagedTablesBackwardOf<T, D, B, F> {
  using Config = sm90::BackwardConfig<T, D, B, false>;
  static constexpr auto kernel = sm90::backward_kernel<T, D, B, F, false>;
  // The same kernel where neither dS's staging nor the boxes change.
  struct ShortSequences {
    static constexpr bool kDiffers = sm90::short_sequences_kernel_differs(D);
    using Config = sm90::BackwardConfig<T, D, B, kDiffers>;
    static constexpr auto kernel = sm90::backward_kernel<T, D, B, F, kDiffers>;
  };
  // The host encodes row boxes only for a kernel that loads them.
  static_assert(Config::kRowBoxes == sm90::backward_row_boxes_kernel(D, BatchKind::kLong) &&
                    ShortSequences::Config::kRowBoxes == sm90::backward_row_boxes_kernel(D, BatchKind::kShort),
                "backward_row_boxes_kernel (params.h) names the kernels whose config has kRowBoxes");
};
#define BLOCKATTN_SM90_COLUMN_SPLIT_BACKWARD(D)                                 \
  template <typename T, core::Fusion F>                                         \
  struct KernelOf<sm90::Params, Operation::kBackward, T, D, 64, F> {            \
    using Config = sm90::ColumnSplitBackwardConfig<T, D>;                       \
    static constexpr auto kernel = sm90::column_split_backward_kernel<T, D, F>; \
  };
BLOCKATTN_SM90_COLUMN_SPLIT_BACKWARD(224)
BLOCKATTN_SM90_COLUMN_SPLIT_BACKWARD(256)
#undef BLOCKATTN_SM90_COLUMN_SPLIT_BACKWARD
template <typename T, int D, core::Fusion F>
struct KernelOf<sm90::Params, Operation::kBackward, T, D, 128, F> {
  using Config = sm90::SharedTileBackwardConfigOf<T, D, F>;
  static constexpr auto kernel = sm90::shared_tile_backward_kernel<T, D, F>;
};
}  // namespace blockattn
