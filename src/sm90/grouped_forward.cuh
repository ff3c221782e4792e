// sm90 forward for grouped-query attention (Hq = G Hkv, G > 1) at D = 64,
// 64-token blocks: a unit of work is one block of one KV head with the G
// query heads that read it, in one CTA, so K and V leave the L2 once per unit
// instead of once per query head.
//
// Why: the per-tile forward (forward_kernel.cuh) loads K and V with every
// query head's tile. At mqa-d64-h8x1 that is 24 KB of L2 reads per 18 KB of
// the floor's bytes: ncu on an H200 read 5.4 GB from the L2 for 2.1 GB from
// DRAM, the L2 87% busy with DRAM at 74%, where the MHA forward's DRAM runs
// at 91%. This kernel reads mqa-d64-h8x1 at 88.1-88.5% of copy where the
// per-tile one read 77.3-77.6 (H200, sustained). At D = 128, with two
// consumers, it read gqa-d128-h8x2 at 90.5-90.8 against the per-tile
// kernel's 97.4-97.7 (a KV head's four query heads there, and half the
// heads in flight), so D = 128 keeps the per-tile kernel
// (sm90::grouped_forward_kernel; docs/perf.md, "Session 62").
//
// Frame: grouped_ring.cuh's run_grouped_ring with one tensor a head (Q): the
// producer lands a unit's K and V in one of the K/V pairs, then each query
// head's Q in a ring slot. Every consumer walks every unit (zeroes V's tail
// with the others, releases the pair); the unit's heads go round the
// consumers by their place in the ring's stream, so that with a slot count
// that is a multiple of theirs a slot only ever holds one consumer's heads,
// which it alone waits for and hands back (GroupedForwardConfig::kSlots).
//
// Tile op per head: the per-tile forward's forward_rows (forward_rows.cuh):
// S = Q K^T (both operands in shared memory), the exact softmax, O = P V (P
// from registers, V MN-major), O normalized, staged in the head's own Q slot
// and stored with 16-byte stores that skip rows past the block's end; then
// the slot goes back.
#pragma once

#include "common/opaque.cuh"
#include "sm90/forward_rows.cuh"
#include "sm90/grouped_ring.cuh"
#include "sm90/loader.cuh"
#include "sm90/params.h"
#include "tile/hooks.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

template <typename T, int D>
struct GroupedForwardConfig {
  static_assert(D == 64, "grouped_forward_kernel() in params.h says which rows have it");
  static constexpr int kRows = 64;  // query rows = key rows of a tile, and the TMA box rows
  // What forward_rows reads: one 64-row block a head, every column a real
  // one, and each row's keys its own sequence's (a tiles table's packed
  // runs; on the blocks table the block's first row_count).
  static constexpr int kHeadDim = D, kPaddedD = D, kKeys = kRows, kConsumerRows = kRows;
  static constexpr bool kPacked = true;
  // A head's chain (Q's wait, S, the softmax, O = P V, O's way out) runs in
  // one warpgroup, so more of them keep more heads in flight: four, whose
  // S 32, P 16 and O 32 registers a thread fit in 104 (mqa-d64-h8x1 88.1-88.5%
  // of copy on an H200, 83.3-83.9 with two).
  static constexpr int kConsumers = 4;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kWaitsForPriorGrids = true;  // grouped_forward_kernel()'s first step
  static constexpr int kConsumerThreads = 128 * kConsumers;
  using Layout = tile::Chunked<kRows, tile_chunk_cols(Operation::kForward, D)>;  // the host's maps write this
  static constexpr int kChunks = D / Layout::kChunkColumns;
  static constexpr int kSlotBytes = kChunks * Layout::kChunkBytes;  // one head's tile of Q, K or V
  static constexpr int kHeadTensors = 1;                            // a head's tensors in the ring: Q
  static constexpr int kKvPairs = 2;                                // a unit's K and V, and the next unit's landing
  static constexpr int kKvReleasers = 4 * kConsumers;               // every consumer reads every unit's K and V
  static constexpr int kHeadReleasers = 4;                          // a head's Q: its consumer's warps
  static constexpr int kBarrierBytes = 2 * kKvPairs * static_cast<int>(sizeof(Barrier));
  static constexpr int kScratchBytes = kKvPairs * 2 * kSlotBytes + kBarrierBytes;
  using Budget = TensorRingBudget<kSlotBytes, kScratchBytes>;
  // A multiple of kConsumers, so that slot s holds only tensors
  // j = s (mod kConsumers) of the stream, consumer (j % kConsumers)'s: each
  // consumer's waits on a slot's full barrier follow its every phase.
  static constexpr int kSlots = Budget::kSlots / kConsumers * kConsumers;
  static_assert(kSlots >= 2 * kConsumers, "two heads in flight per consumer");
  static constexpr int kSmemBytes = Budget::kSmemBytes;
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 104;  // 128 x 40 + 512 x 104 <= 64K
};

template <typename T, int D>
struct GroupedForwardSmem {
  using Cfg = GroupedForwardConfig<T, D>;
  using Ring = TensorRing<Cfg::kSlots, Cfg::kSlotBytes>;
  Ring ring;
  unsigned char* kv;  // kKvPairs x (K, V)
  Barrier* kv_full;   // [kKvPairs]
  Barrier* kv_empty;  // [kKvPairs]

  __device__ explicit GroupedForwardSmem(unsigned char* raw) {
    ring.base = tile::align_shared_1024(raw);
    kv = ring.base + Cfg::kSlots * Cfg::kSlotBytes;
    kv_full = reinterpret_cast<Barrier*>(kv + Cfg::kKvPairs * 2 * Cfg::kSlotBytes);
    kv_empty = kv_full + Cfg::kKvPairs;
    ring.full = kv_empty + Cfg::kKvPairs;
    ring.empty = ring.full + Cfg::kSlots;
  }
  __device__ void init_barriers() const {  // run_grouped_ring's thread 0
    for (int s = 0; s < Cfg::kSlots; ++s) {
      ring.full[s].init(1);
      ring.empty[s].init(Cfg::kHeadReleasers);
    }
    for (int s = 0; s < Cfg::kKvPairs; ++s) {
      kv_full[s].init(1);
      kv_empty[s].init(Cfg::kKvReleasers);
    }
  }
  __device__ KvPair pair(int unit_in_stream) const {
    const auto slot = RingSlot<Cfg::kKvPairs>::of(unit_in_stream);
    unsigned char* k = kv + slot.stage * 2 * Cfg::kSlotBytes;
    return {k, k + Cfg::kSlotBytes, &kv_full[slot.stage], &kv_empty[slot.stage], slot.phase};
  }
};

// One unit, the CTA's u-th, for one consumer: its heads (stream tensors
// first + g = consumer mod kConsumers), between the pair's landing and its
// release.
template <typename T, int D>
__device__ __forceinline__ void grouped_forward_unit(const Params& p, const GroupedForwardSmem<T, D>& sm,
                                                     const tile::TileCoords& unit, int u, int first, int consumer) {
  using Cfg = GroupedForwardConfig<T, D>;
  using Layout = typename Cfg::Layout;
  const int consumer_tid = opaque_thread_index<Cfg::kConsumerThreads>(128);  // over all consumers
  const int tid = consumer_tid % 128, lane = consumer_tid % 32;
  const uint32_t own_barrier = kOwnBarrier0 + consumer;
  const int valid = unit.block.row_count;
  const KvPair kv = sm.pair(u);
  kv.full->wait(kv.phase);
  if (valid < Cfg::kRows) {
    // V's rows past the block's end meet P's exact zeros: zeroed, so that
    // whatever lies there (the next sequence's rows, inf or NaN included)
    // adds nothing. Every consumer's products read V: all zero it, and
    // wait for each other. (Q's and K's tails feed only rows and columns
    // that are discarded or masked.)
    tile::zero_rows_from<Layout, Cfg::kRows, D, Cfg::kConsumerThreads>(reinterpret_cast<T*>(kv.v), valid, consumer_tid);
    fence_async_shared();  // generic writes, read next by wgmma (async proxy)
    named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);
  }
  const T* const k = reinterpret_cast<const T*>(kv.k);
  const T* const v = reinterpret_cast<const T*>(kv.v);
  const tile::Hooks<core::Fusion::kNone> hooks(p.attn);
#pragma unroll 1
  for (int g = (consumer + Cfg::kConsumers - first % Cfg::kConsumers) % Cfg::kConsumers; g < p.attn.group_size;
       g += Cfg::kConsumers) {
    const TileTensors<typename GroupedForwardSmem<T, D>::Ring> in{sm.ring, first + g};
    in.wait(0);
    tile::TileCoords head = unit;
    head.q_head += g;
    forward_rows<Cfg>(p, hooks, head, in.template data<T>(0), k, v, /*half=*/0, own_barrier, tid);
    in.release(0, lane);  // O's staging: generic writes before the slot's next TMA write
  }
  release_fenced_stage(*kv.empty, lane);  // this consumer's products that read K and V are done
}

template <typename T, int D, core::Fusion F>
__global__ void __launch_bounds__(GroupedForwardConfig<T, D>::kThreads, 1)
    grouped_forward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // launched overlapping the schedule kernel (schedule/programmatic_launch.cuh)
  static_assert(F == core::Fusion::kNone, "no rotary prologue in the grouped forward");
  using Cfg = GroupedForwardConfig<T, D>;
  using Layout = typename Cfg::Layout;
  extern __shared__ unsigned char smem_raw[];
  const GroupedForwardSmem<T, D> sm(smem_raw);
  const KvHeadUnits<Layout, Cfg::kChunks> units(p);
  auto load_kv = [&](const tile::TileCoords& unit, const KvPair& kv) { units.load_kv(unit, kv); };
  auto load_head = [&](const tile::TileCoords& unit, int g, unsigned char* slot, Barrier& full) {
    const TmaTile tiles[1] = {{&p.q_map, unit.q_head + g, slot}};
    load_block_tiles<Layout, Cfg::kChunks>(tiles, unit.block.row_begin, full);
  };
  run_grouped_ring<Cfg, Cfg::kHeadTensors>(
      sm, units.count(), p.attn.group_size, units, load_kv, load_head,
      [&](const tile::TileCoords& unit, int u, int first, int consumer)
          BLOCKATTN_INLINE { grouped_forward_unit<T, D>(p, sm, unit, u, first, consumer); },
      [] {});
}

}  // namespace blockattn::sm90
