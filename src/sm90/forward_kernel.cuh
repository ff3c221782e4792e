// sm90 forward kernel: persistent, warp-specialized, TMA + wgmma.
//
//   frame:   frame.cuh, one producer and two consumer warpgroups per CTA, one
//            CTA per SM, a ring of kStages {Q, K, V} stages;
//   loader:  TMA copies of the tile's Q (query head) and K, V (its KV head);
//   tile op: forward_tile, per consumer warpgroup: S = Q K^T (wgmma, both
//            operands in shared memory), exact softmax in fp32 registers,
//            O = P V (wgmma, P from registers, V transposed from shared
//            memory), normalization; O is staged in the tile's own Q buffer
//            and leaves with 16-byte stores that skip rows past the block end.
//            A 128-token tile is shared by two consumers, a 64-row half each
//            against all 128 keys (a slot group in the frame's terms), or
//            taken whole by one, row half after row half (rotary:
//            forward_tile_consumers).
// Grouped-query heads at D = 64 run grouped_forward.cuh instead (the rows'
// Grouped variant, below), which loads a block's K and V once for a KV
// head's query heads.
// The workload is memory-bound (32 FLOP/byte): all the design is about keeping
// kStages tiles of loads in flight per SM from the first tile to the last.
// With rotary at D = 128 (and D = 64 at 128-token blocks:
// forward_stages_angles) the producer also brings each tile's cos and sin
// table rows by TMA into a slot of its consumer (of the slot group of a
// shared 128-token tile's row halves), a tile ahead
// (StagedAngleSlots below), so that the prologue's rotation reads its
// angles from shared memory instead of waiting on the L2.
//
// Head dims that are not a multiple of 64 (32, 96, 160, 224) fill whole
// 64-column chunks (tile_chunk_cols in params.h): the TMA box reads past the
// head's last column as zeros (the map's innermost extent is D), so the bytes
// moved are the head's own.
// S sums over the D real columns only; O = P V runs over the padded width
// (a wgmma N the instruction has) and only D columns are stored.
#pragma once

#include <type_traits>

#include "common/kernel_launcher.cuh"
#include "sm90/forward_rows.cuh"
#include "sm90/frame.cuh"
#include "sm90/grouped_forward.cuh"
#include "sm90/loader.cuh"
#include "sm90/params.h"
#include "sm90/wgmma.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// Consumer warpgroups: three or four where a tile's latency rather than its
// bytes bounds the kernel, two where more would cost bandwidth (measured,
// docs/perf.md "Three forward consumers" and after): D = 32 (89.8% -> 99.4%
// of copy at headdim-d32-h16), at D = 64 batches of sequences shorter than a
// block (tail-d64 83% -> 93% with three; four, session 37: +2 points more on
// the H100 and the H200), and the rotary forward (whose rotation latency a
// third consumer hides: headline-d64 2.73 -> 2.54 ms); long sequences at
// D = 64 lose 12 points with three. 128-token blocks take two, the row
// halves of a tile or a tile each (forward_tile_consumers): S of 128 keys
// and its operand alone are 96 registers a thread, past what three or four
// consumers may hold.
constexpr int forward_consumers(int head_dim, int block_size, core::Fusion fusion, BatchKind kind) {
  if (block_size == 128) return 2;
  if (head_dim <= 32) return 3;
  if (head_dim <= 64 && kind == BatchKind::kShort) return fusion == core::Fusion::kNone ? 4 : 3;
  if (head_dim <= 64 && fusion == core::Fusion::kRotary) return 3;
  return 2;
}

// Consumers that share one 128-token tile of the forward, a 64-row half each
// (ForwardConfig::kTileConsumers): two, so that both halves of a tile run at
// once (the plain forward sits at the copy floor so). With rotary, one: each
// consumer rotates a whole tile, then computes its two row halves in turn,
// so that one consumer's rotation runs under the other's products and
// softmax; with a shared tile both rotated before either half's S, and the
// tensor cores waited on every rotation. H200, bf16 tables: headline-d64
// 2.74 -> 2.29-2.36 ms, headline-d128 and sweep-d128-L256-f0.5 4-6% faster.
// fp32 tables: level at D = 64, 7% slower at D = 128 (3.21 -> 3.43 ms at
// headline-d128), where kAuto takes the portable kernel for them (3.02;
// docs/perf.md, "Session 57"). At D = 64 the stages stay four and each
// consumer has its own angle slot (4 x 48 KB + 2 x 16 KB); at D = 128 each
// has one 96 KB stage and the two take one angle slot in turn
// (StagedAngleSlots). Three consumers a tile each at D = 64 (one stage
// each) were 3% faster with bf16 tables and 4% slower with fp32.
constexpr int forward_tile_consumers(int block_size, core::Fusion fusion) {
  return fusion == core::Fusion::kRotary ? 1 : block_size / 64;  // a 64-token tile has one half
}

template <typename T, int D, int B, int kConsumerGroups, bool kPackedTiles, int kHeadsPerSlot, int kConsumersPerTile>
struct ForwardConfig {
  using Elem = T;
  static_assert(B == 64 || B == 128, "a tile is one block of one or two m64 wgmma row blocks");
  static constexpr int kHeadDim = D;
  static constexpr int kRows = B;  // query rows of a tile, and the TMA box rows
  static constexpr int kKeys = B;  // key columns of S
  // A consumer's products take one m64 row block of queries at a time, its
  // row half of a 128-token tile against all 128 keys (m64n128 S): the
  // tile's halves go to two consumers (kTileConsumers = 2) or to one, in
  // turn (kRowPasses = 2; forward_tile_consumers).
  static constexpr int kConsumerRows = 64;
  static constexpr int kRowHalves = B / kConsumerRows;
  static constexpr int kTileConsumers = kConsumersPerTile;
  static_assert(kRowHalves % kTileConsumers == 0, "whole row halves a consumer");
  static constexpr int kRowPasses = kRowHalves / kTileConsumers;
  using Layout = tile::Chunked<kRows, tile_chunk_cols(Operation::kForward, D)>;
  static constexpr int kConsumers = kConsumerGroups;  // forward_consumers()
  static_assert(kConsumers >= 2 && kConsumers <= 4, "the register split below");
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kWaitsForPriorGrids = true;  // forward_kernel()'s first step
  static constexpr int kChunkCols = Layout::kChunkColumns;
  static constexpr int kChunks = (D + kChunkCols - 1) / kChunkCols;  // chunks per row
  static constexpr int kPaddedD = kChunks * kChunkCols;              // columns of a tile in smem
  static constexpr int kChunkBytes = Layout::kChunkBytes;
  static constexpr int kTileBytes = kChunks * kChunkBytes;  // one head's tile of Q, K or V
  // Query heads a slot carries (forward_heads_per_slot), one per consumer of
  // a slot group (frame.cuh): a stage holds each tensor's tiles of them side
  // by side, as one pair box of the host's pair maps fills them.
  static constexpr int kHeads = kHeadsPerSlot;
  // Either form of sharing makes a slot group: a consumer per head of a pair,
  // or per row half of a shared 128-token tile.
  static constexpr int kConsumersPerSlot = kHeads * kTileConsumers;
  static_assert(kHeads == 1 || (kHeads == 2 && kChunks == 1 && kConsumers % 2 == 0 && kRowHalves == 1),
                "head pairs: one 64-column chunk a head (the pair maps' box), two consumers a slot");
  static_assert(kConsumers % kConsumersPerSlot == 0, "whole slot groups");
  // The consumers of a shared tile meet once, after they have zeroed a
  // partial tile's V rows or rotated its operands together (forward_tile):
  // a named barrier past the consumers' own.
  static constexpr uint32_t kTileBarrier = 1 + kConsumers;
  static_assert(kRowHalves == 1 || (kConsumerRows * Layout::kRowBytes) % 1024 == 0,
                "a row half starts on the swizzle's 1024-byte period (its A descriptor's base)");
  static constexpr int kStageBytes = 3 * kHeads * kTileBytes;
  // 216 KB of tiles with three or four consumers (18 stages at D = 32, 8 at
  // D = 64 with four, 4 of head pairs), 192 KB with two (8 at D = 64, 4 at
  // 128, 2 past); a multiple of the slot groups.
  static constexpr int kSlotGroups = kConsumers / kConsumersPerSlot;
  static constexpr int kStages = (kConsumers >= 3 ? 216 * 1024 : 192 * 1024) / kStageBytes / kSlotGroups * kSlotGroups;
  static_assert(kStages % kSlotGroups == 0, "each slot group owns fixed stages");
  static constexpr int kRingBytes = kStages * kStageBytes + 2 * kStages * 8;  // the stages, then their barriers
  static constexpr int kSmemBytes = 1024 /* alignment slack */ + kRingBytes;
  // 128 x 40 + 256 x 232 <= 64K with two consumers, 128 x 40 + 384 x 152
  // with three, 128 x 40 + 512 x 104 with four (D = 64: no spills). The
  // producer needs ~40 for its TMA coordinates without spilling.
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = kConsumers == 4 ? 104 : kConsumers == 3 ? 152 : 232;
  // The tiles table (runs of short sequences packed, for batches of them:
  // forward_packs_short_sequences()) or the blocks table, which has no empty
  // entries (frame.cuh).
  static constexpr bool kPacked = kPackedTiles;
  static_assert(!kPacked || kRowHalves == 1, "packed tiles of 64 tokens (forward_packs_short_sequences)");
  static constexpr bool kEmptyEntries = kPackedTiles;
  // One arrival per warp is racecheck-clean on the blocks table, not on the
  // packed tiles, nor where a partial tile's V rows are zeroed by both
  // consumers of a shared 128-token tile, across their warps (frame.cuh).
  static constexpr bool kReleasePerThread = kPackedTiles || kTileConsumers > 1;
  // In the static part of the walk (the first ring's worth), neighbouring
  // heads to neighbouring CTAs (frame.cuh's cta_tile): on the static walk a
  // CTA taking them together cost headline-d64 7 points and tail-d64 13
  // (docs/perf.md, "Neighbouring tiles together in the sm_90 frame"). The
  // chunks claimed past it are runs of consecutive tiles, where they cost
  // little (docs/perf.md, "Session 36").
  static constexpr int kNeighbourTiles = 1;
};

// Shared memory: 1024-byte aligned stages (Q, K, V tiles, each of the slot's
// heads), then the barriers.
template <typename Cfg>
struct ForwardSmem {
  using T = typename Cfg::Elem;
  unsigned char* tiles;
  Barrier* full;   // producer -> consumer: the stage's bytes have landed
  Barrier* empty;  // consumer -> producer: the stage may be refilled

  __device__ explicit ForwardSmem(unsigned char* raw) {
    tiles = tile::align_shared_1024(raw);  // shared-space pointers: LDS/STS, not generic LD/ST
    full = reinterpret_cast<Barrier*>(tiles + Cfg::kStages * Cfg::kStageBytes);
    empty = full + Cfg::kStages;
  }
  // The tiles of the slot's `head`-th query head (0 or 1 with head pairs).
  __device__ T* q(int stage, int head = 0) const {
    return reinterpret_cast<T*>(tiles + stage * Cfg::kStageBytes + head * Cfg::kTileBytes);
  }
  __device__ T* k(int stage, int head = 0) const { return q(stage, head) + Cfg::kHeads * Cfg::kTileBytes / 2; }
  __device__ T* v(int stage, int head = 0) const { return q(stage, head) + Cfg::kHeads * Cfg::kTileBytes; }
};

// The slots of staged rotary table rows (forward_stages_angles), in
// dynamic shared memory after the ring's barriers (a launch without staged
// angles leaves the region out: ForwardLaunchConfig). The producer fills a
// tile's slot once the slot's previous tile has been rotated (`empty`: one
// arrival per thread of that tile's slot group after its last read), so
// that the copy runs under that group's products.
//   a slot per slot group, where they fit: group g's own (its tiles take
//     the fixed stages g, g + G, ..., so the producer's stage % kSlots
//     names it);
//   else one, the groups' tiles in turn (D = 128 at 128-token blocks with a
//     tile per consumer: two 32 KB slots do not fit beside the two 96 KB
//     stages). The CTA's tile n (g + G j for group g's j-th) takes fill n
//     (wait_for_fill_in_turn, sm90/sync.cuh, which says why only two
//     groups may share it; the group's own previous release, tile n - 2's,
//     has completed: each of its threads arrives before the group's
//     barrier that ends the prologue).
// One table's rows: kRows x r/2 16-bit values, r <= D.
template <typename Cfg>
struct StagedAngleSlots {
  static constexpr int kTableRows = Cfg::kRows;
  static constexpr int kTableBytes = kTableRows * (Cfg::kHeadDim / 2) * 2;
  static constexpr int kSlotBytes = 2 * kTableBytes;             // cos rows, then sin rows
  static constexpr int kReaders = 128 * Cfg::kConsumersPerSlot;  // a group's threads
  static constexpr int kOffset = (Cfg::kRingBytes + 127) / 128 * 128;
  static constexpr int extra_smem_bytes(int slots) { return kOffset + slots * (kSlotBytes + 2 * 8) - Cfg::kRingBytes; }
  // 512 bytes kept for the frame's published tiles (static shared memory).
  static constexpr int kSlots =
      Cfg::kSmemBytes + extra_smem_bytes(Cfg::kSlotGroups) + 512 <= 227 * 1024 ? Cfg::kSlotGroups : 1;
  static constexpr bool kShared = kSlots < Cfg::kSlotGroups;
  static constexpr int kExtraSmemBytes = extra_smem_bytes(kSlots);  // beside Cfg::kSmemBytes
  unsigned char* slots;                                             // [kSlots][kSlotBytes]
  Barrier* full;                                                    // [kSlots] producer -> group: the rows have landed
  Barrier* empty;  // [kSlots] group -> producer: the slot may be refilled

  __device__ explicit StagedAngleSlots(unsigned char* ring)
      : slots(ring + kOffset), full(reinterpret_cast<Barrier*>(slots + kSlots * kSlotBytes)), empty(full + kSlots) {}
  __device__ unsigned char* cos(int slot) const { return slots + slot * kSlotBytes; }
  __device__ unsigned char* sin(int slot) const { return cos(slot) + kTableBytes; }

  // Slot group g's slot.
  __device__ static int slot_of_group(int g) { return kShared ? 0 : g; }
  // Waits until the rows of slot group g's next tile have landed, and
  // returns their slot. `turn`, a thread's own: the parity of its own
  // slot's next fill, or with the shared slot its group's tiles so far.
  __device__ int wait_for_rows(int g, uint32_t& turn) const {
    if constexpr (!kShared) {
      full[g].wait(turn);
      turn ^= 1;
      return g;
    } else {
      const uint32_t n = g + Cfg::kSlotGroups * turn++;  // consume_tiles' order: the slot's n-th use
      wait_for_fill_in_turn(full[0], empty[0], n);
      return 0;
    }
  }
};
// In place of StagedAngleSlots where a kernel stages none.
struct NoStagedAngles {
  __device__ explicit NoStagedAngles(unsigned char*) {}
};

// A forward kernel's launch config: its ring's, and the angle slots where
// it stages angles, launched with them only where the host staged them
// (Params::staged_angles): the 32 KB they take at D = 128 would otherwise
// come out of the L1 that the table's direct reads hit (fp32 tables).
template <typename Cfg, bool kStagedAngles>
struct ForwardLaunchConfig : Cfg {
  static constexpr int kSmemBytes = Cfg::kSmemBytes + (kStagedAngles ? StagedAngleSlots<Cfg>::kExtraSmemBytes : 0);
  static int launch_smem_bytes(const Params& p) { return p.staged_angles ? kSmemBytes : Cfg::kSmemBytes; }
};

// `angles`: StagedAngleSlots where the kernel stages the rotary rows (then
// `angle_turn` is this thread's place in its slot's fills), else
// NoStagedAngles.
template <typename Cfg, typename Hooks, typename Angles>
__device__ __forceinline__ void forward_tile(const Params& p, const Hooks& hooks, const ForwardSmem<Cfg>& sm,
                                             const tile::TileCoords& slot_coords, int stage, int consumer,
                                             const Angles& angles, uint32_t& angle_turn) {
  using T = typename Cfg::Elem;
  constexpr int D = Cfg::kHeadDim;
  using Layout = typename Cfg::Layout;
  // Unsigned and masked to the warpgroup, so tid % 32, tid / 32 and the
  // layouts' offsets compile to shifts, not signed division (perf.md, "Signed
  // division in the consumers' address arithmetic").
  const int tid = threadIdx.x % 128;
  const uint32_t barrier_id = 1 + consumer;
  // This consumer's place in its slot group: which of the slot's heads it
  // takes, or which row half of a shared 128-token tile.
  const int place = consumer % Cfg::kConsumersPerSlot;
  const int head = Cfg::kHeads > 1 ? place : 0;
  const int share = Cfg::kTileConsumers > 1 ? place : 0;
  tile::TileCoords t = slot_coords;
  if constexpr (Cfg::kHeads > 1) {
    if (head == 1) {
      if (t.q_head + 1 >= p.attn.num_q_heads) return;  // an odd head count's last slot has one head
      t.kv_head = tile::kv_head_after(t, p.attn.group_size);
      ++t.q_head;
    }
  }
  const int valid = t.block.row_count;
  struct {
    T *q, *k, *v;
  } ops{sm.q(stage, head), sm.k(stage, head), sm.v(stage, head)};
  // What touches the whole tile in shared memory (V's tail, the rotation of
  // Q, K and V) is shared by the consumers of a shared 128-token tile: their
  // threads together, who then meet at kTileBarrier below.
  constexpr int kTileThreads = 128 * Cfg::kTileConsumers;
  const int tile_tid = 128 * share + tid;
  if (valid < Cfg::kRows) {  // Q and K tails only feed rows and columns that are discarded or masked
    tile::zero_rows_from<Layout, Cfg::kRows, D, kTileThreads>(ops.v, valid, tile_tid);
  }
  constexpr bool kStaged = !std::is_same_v<Angles, NoStagedAngles>;
  const int group = consumer / Cfg::kConsumersPerSlot;  // its slot group, whose angle slot it reads where staged
  if constexpr (!kStaged) {
    hooks.template prologue<Layout, Cfg::kRows, D, kTileThreads>(t, tile_tid, ops.q, ops.k, ops.v);
  } else if (p.staged_angles) {
    const int slot = angles.wait_for_rows(group, angle_turn);
    hooks.template prologue<Layout, Cfg::kRows, D, kTileThreads>(
        t, tile_tid, ops.q, ops.k, ops.v, tile::StagedAngles{angles.cos(slot), angles.sin(slot), t.first_position});
  } else {
    hooks.template prologue<Layout, Cfg::kRows, D, kTileThreads>(t, tile_tid, ops.q, ops.k, ops.v);
  }
  static_assert(!kStaged || Hooks::kModifiesOperands, "the staged slot goes back after the fence below");
  if (valid < Cfg::kRows || Hooks::kModifiesOperands) {
    fence_async_shared();  // generic writes, read next by wgmma (async proxy)
    // The thread's reads of the slot are done and complete (the fence waits
    // for them; an arrival does not: the per-tile backward's, before its
    // fence, released loads still outstanding, docs/perf.md "Session 56").
    if constexpr (kStaged) {
      if (p.staged_angles) angles.empty[Angles::slot_of_group(group)].arrive();
    }
    if constexpr (Cfg::kTileConsumers == 1)
      named_barrier_sync(barrier_id, 128);
    else  // both halves' products read every row the other half may have written
      named_barrier_sync(Cfg::kTileBarrier, kTileThreads);
  }
  // The consumer's row halves: its own of a shared tile, or each in turn.
#pragma unroll 1
  for (int pass = 0; pass < Cfg::kRowPasses; ++pass) {
    const int half = share + pass;
    if constexpr (Cfg::kRowHalves > 1) {
      if (Cfg::kConsumerRows * half >= valid) return;  // a half past the block's end has no rows to write
    }
    forward_rows<Cfg>(p, hooks, t, ops.q, ops.k, ops.v, half, barrier_id, tid);
  }
}

// A head-pair slot's copies: Q of both query heads in one box; K and V too
// where the two have neighbouring KV heads (no grouping), else the KV head
// they share twice, so that each consumer of the slot owns its tiles (it
// zeroes V's rows past the block in place). Three copies for two tiles
// where there were six. An odd head count's last slot has one head, loaded
// alone. Announces the bytes it loads on `full`.
template <typename Cfg>
__device__ __forceinline__ void load_head_pairs(const Params& p, const ForwardSmem<Cfg>& sm, const tile::TileCoords& t,
                                                int stage, Barrier& full) {
  using Layout = typename Cfg::Layout;
  const int32_t row = t.block.row_begin;
  const bool one_head = t.q_head + 1 == p.attn.num_q_heads;
  full.arrive_expect_tx(one_head ? Cfg::kStageBytes / 2 : Cfg::kStageBytes);  // rows past T count too
  if (one_head) {
    const TmaTile tiles[3] = {
        {&p.q_map, t.q_head, sm.q(stage)}, {&p.k_map, t.kv_head, sm.k(stage)}, {&p.v_map, t.kv_head, sm.v(stage)}};
    load_block_tiles<Layout, 1>(tiles, row, full);
    return;
  }
  load_head_pair(&p.q_pair_map, t.q_head, sm.q(stage), row, full);
  if (tile::kv_head_after(t, p.attn.group_size) != t.kv_head) {
    load_head_pair(&p.k_pair_map, t.kv_head, sm.k(stage), row, full);
    load_head_pair(&p.v_pair_map, t.kv_head, sm.v(stage), row, full);
  } else {
    const TmaTile tiles[4] = {{&p.k_map, t.kv_head, sm.k(stage, 0)},
                              {&p.k_map, t.kv_head, sm.k(stage, 1)},
                              {&p.v_map, t.kv_head, sm.v(stage, 0)},
                              {&p.v_map, t.kv_head, sm.v(stage, 1)}};
    load_block_tiles<Layout, 1>(tiles, row, full);
  }
}

// The producer's copy of tile t's table rows into slot g, once the slot's
// previous tile has been rotated: kRows rows of each table from the
// block's first position (rows past the table read as zeros; the prologue
// treats those positions as the identity without reading them).
template <typename Slots>
__device__ __forceinline__ void load_angles(const Params& p, const Slots& angles, const tile::TileCoords& t, int g,
                                            uint32_t& loads) {
  const RingSlot<1> slot{0, (loads >> g) & 1u};
  loads ^= 1u << g;
  angles.empty[g].wait(slot.empty_parity());
  load_table_rows<Slots::kTableRows>(&p.cos_map, &p.sin_map, static_cast<int32_t>(t.first_position), p.attn.rotary.half,
                                     angles.cos(g), angles.sin(g), angles.full[g]);
}

// The kernel's config: its tile consumers follow from the rest (forward_tile_consumers).
template <typename T, int D, int B, core::Fusion F, int C, bool P, int H>
using ForwardConfigOf = ForwardConfig<T, D, B, C, P, H, forward_tile_consumers(B, F)>;

template <typename T, int D, int B, core::Fusion F, int C, bool P, int H>
__global__ void __launch_bounds__(ForwardConfigOf<T, D, B, F, C, P, H>::kThreads, 1)
    forward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // launched overlapping the schedule kernel (schedule/programmatic_launch.cuh)
  using Cfg = ForwardConfigOf<T, D, B, F, C, P, H>;
  extern __shared__ unsigned char smem_raw[];
  const ForwardSmem<Cfg> sm(smem_raw);
  const tile::Hooks<F> hooks(p.attn);
  static_assert(H == 1 || F == core::Fusion::kNone, "head pairs without a hook set's per-tile prologue");
  // The walk's tiles are slots: (block, kHeads neighbouring query heads).
  tile::QueryHeadWalk<F, H> coords_of(p.attn);  // the producer's alone
  const int num_tiles = p.attn.schedule.block_count() * coords_of.units_per_block();

  constexpr bool kStagedAngles = forward_stages_angles(D, B, F, P);
  using Angles = std::conditional_t<kStagedAngles, StagedAngleSlots<Cfg>, NoStagedAngles>;
  const Angles angles(sm.tiles);
  if constexpr (kStagedAngles) {
    static_assert(H == 1, "one query head a slot");
    static_assert(!Angles::kShared || Cfg::kSlotGroups == 2, "the shared slot's waits hold for two slot groups");
    static_assert(ForwardLaunchConfig<Cfg, true>::kSmemBytes + 512 <= 227 * 1024,
                  "the angle slots do not fit beside the ring and the published tiles");
    // Only where the launch has the slots' region (launch_smem_bytes); made
    // visible to TMA by run_frame's fence and __syncthreads.
    if (threadIdx.x == 0 && p.staged_angles) {
      for (int g = 0; g < Angles::kSlots; ++g) {
        angles.full[g].init(1);
        angles.empty[g].init(Angles::kReaders);
      }
    }
  }
  uint32_t angle_loads = 0;  // the producer's: bit g is the parity of slot g's fills
  uint32_t angle_turn = 0;   // a consumer thread's (StagedAngleSlots::wait_for_rows)

  // The consumers take the producer's coordinates as published: with the
  // hooks' look_ahead on them (what the backward does), the rotary forward
  // gained nothing and lost 2-4% at sweep-d64-L256-f0.5 (docs/perf.md, "The
  // table row looked up ahead"); nor did the 128-token forward's with fp32
  // tables gain (session 51). Where the angles are staged the producer
  // needs the block's first table row for their copy, and publishes it.
  run_frame<Cfg>(
      sm.full, sm.empty, num_tiles, p.attn.schedule.claims,
      [&](int tile) BLOCKATTN_INLINE {
        tile::TileCoords t = coords_of(tile);
        if constexpr (kStagedAngles) {
          if (p.staged_angles) t = hooks.look_ahead(t);
        }
        return t;
      },
      [](const tile::TileCoords& t) BLOCKATTN_INLINE { return t; },
      [&](const tile::TileCoords& t, int stage, Barrier& full) BLOCKATTN_INLINE {
        if constexpr (Cfg::kHeads == 1) {
          const TmaTile tiles[3] = {{&p.q_map, t.q_head, sm.q(stage)},
                                    {&p.k_map, t.kv_head, sm.k(stage)},
                                    {&p.v_map, t.kv_head, sm.v(stage)}};
          full.arrive_expect_tx(Cfg::kStageBytes);  // rows past T are zero-filled but still counted
          load_block_tiles<typename Cfg::Layout, Cfg::kChunks>(tiles, t.block.row_begin, full);
        } else {
          load_head_pairs(p, sm, t, stage, full);
        }
        if constexpr (kStagedAngles) {
          if (p.staged_angles) load_angles(p, angles, t, stage % Angles::kSlots, angle_loads);
        }
      },
      [&](const tile::TileCoords& t, int stage, int consumer)
          BLOCKATTN_INLINE { forward_tile<Cfg>(p, hooks, sm, t, stage, consumer, angles, angle_turn); });
}

}  // namespace blockattn::sm90

namespace blockattn::sm90 {
// Rows where grouped_forward_kernel() holds carry the grouped forward as
// their Grouped variant.
template <typename T, int D, int B, core::Fusion F, bool = grouped_forward_kernel(D, B, F == core::Fusion::kRotary)>
struct GroupedForwardOf {};
template <typename T, int D, int B, core::Fusion F>
struct GroupedForwardOf<T, D, B, F, true> {
  struct Grouped {
    using Config = GroupedForwardConfig<T, D>;
    static constexpr auto kernel = grouped_forward_kernel<T, D, F>;
  };
};
}  // namespace blockattn::sm90

namespace blockattn {
template <typename T, int D, int B, core::Fusion F>
struct KernelOf<sm90::Params, Operation::kForward, T, D, B, F> : sm90::GroupedForwardOf<T, D, B, F> {
  using Config =
      sm90::ForwardLaunchConfig<sm90::ForwardConfigOf<T, D, B, F, sm90::forward_consumers(D, B, F, BatchKind::kLong),
                                                      false, sm90::forward_heads_per_slot(D, B, F, BatchKind::kLong)>,
                                sm90::forward_stages_angles(D, B, F, false)>;
  static constexpr auto kernel = sm90::forward_kernel<T, D, B, F, Config::kConsumers, false, Config::kHeads>;
  // For batches of short sequences: forward_consumers()'s count, packed
  // tiles where forward_packs_short_sequences() and head pairs where
  // forward_heads_per_slot(); the same kernel where none changes.
  struct ShortSequences {
    using Config =
        sm90::ForwardLaunchConfig<sm90::ForwardConfigOf<T, D, B, F, sm90::forward_consumers(D, B, F, BatchKind::kShort),
                                                        sm90::forward_packs_short_sequences(D, B),
                                                        sm90::forward_heads_per_slot(D, B, F, BatchKind::kShort)>,
                                  sm90::forward_stages_angles(D, B, F, sm90::forward_packs_short_sequences(D, B))>;
    static constexpr auto kernel =
        sm90::forward_kernel<T, D, B, F, Config::kConsumers, Config::kPacked, Config::kHeads>;
  };
};
}  // namespace blockattn
