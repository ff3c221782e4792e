// The frame of the grouped-query backward (grouped_backward.cuh): a
// persistent, warp-specialized CTA whose units are (block, KV head). The
// producer loads a unit's K and V once, into one of two K/V pairs (the next
// unit's landing while this one computes), then each query head's dO and Q
// into a ring of one-tensor slots, in the order the heads release them; the
// consumers walk the same units and heads.
//
// Deadlock check: the producer waits on (a) the pair the unit two before
// released at its end and (b) ring slots that heads release in load order,
// needing nothing the producer has not issued: no cycle, for any group
// size (a group of 16 streams 32 tensors through 8 slots).
//
// A group of one with alternate units (the MHA backward at D = 64) has a
// second frame, run_alternate_units: each consumer walks only its own units.
#pragma once

#include "schedule/cta_walk.h"
#include "schedule/tile_claims.cuh"
#include "sm90/frame.cuh"
#include "sm90/loader.cuh"
#include "sm90/params.h"
#include "sm90/tensor_ring.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// A head's tensors in the ring, in release order (both after its last products).
enum GroupedHeadTensor : int { kHeadDout = 0, kHeadQ = 1, kHeadTensors = 2 };

// Consumer c's named barrier, kOwnBarrier0 + c (0 is __syncthreads, 1
// kConsumersBarrier, all consumers').
constexpr uint32_t kOwnBarrier0 = 2;

// A unit's K and V: pair u % 2 of the CTA's u-th unit, with its barriers.
struct KvPair {
  unsigned char* k;
  unsigned char* v;
  Barrier* full;   // producer -> consumers: K and V have landed
  Barrier* empty;  // consumers -> producer: every consumer warp is done with both
  uint32_t phase;
};

// The grouped kernels' units, (block, KV head) for every block of the
// schedule, each unit's query heads from q_head on; and the producer's copy
// of a unit's K and V (kChunks chunks laid out as `Layout`) into its pair.
template <typename Layout, int kChunks>
struct KvHeadUnits {
  const Params& p;
  int num_kv_heads;

  __device__ explicit KvHeadUnits(const Params& params)
      : p(params), num_kv_heads(params.attn.num_q_heads / params.attn.group_size) {}
  __device__ int count() const { return p.attn.schedule.block_count() * num_kv_heads; }
  __device__ tile::TileCoords operator()(int unit) const {
    return tile::TileCoords::per_kv_head(p.attn, num_kv_heads, unit);
  }
  __device__ void load_kv(const tile::TileCoords& unit, const KvPair& kv) const {
    const TmaTile tiles[2] = {{&p.k_map, unit.kv_head, kv.k}, {&p.v_map, unit.kv_head, kv.v}};
    load_block_tiles<Layout, kChunks>(tiles, unit.block.row_begin, *kv.full);
  }
};

// The whole frame for `num_units` units (unit = blockIdx.x + i * gridDim.x)
// of `group_size` heads of kTensorsPerHead tensors each (the backward's dO
// and Q, the grouped forward's Q): the producer runs load_kv(coords, pair)
// once per unit and load_head(coords, n, slot, full_barrier) for tensor
// n % kTensorsPerHead of head n / kTensorsPerHead; every consumer warpgroup c
// runs op(coords, u, first, c) for the CTA's u-th unit, `first` being its
// first tensor in the ring's stream, and
// finish() once after its last (what must be done before the CTA exits).
// `Smem` has the ring, pair(u) and init_barriers() (thread 0, before the
// roles split: the ring's, the pairs' and any of the unit op's own). Empty
// entries of the tiles table take nothing, on both sides alike.
template <typename Cfg, int kTensorsPerHead = kHeadTensors, typename Smem, typename CoordsOf, typename LoadKv,
          typename LoadHead, typename UnitOp, typename Finish>
__device__ __forceinline__ void run_grouped_ring(const Smem& sm, int num_units, int group_size, CoordsOf&& coords_of,
                                                 LoadKv&& load_kv, LoadHead&& load_head, UnitOp&& op, Finish&& finish) {
  if (threadIdx.x == 0) {
    sm.init_barriers();
    fence_barrier_init();
  }
  __syncthreads();
  split_roles<Cfg>(
      [&]() BLOCKATTN_INLINE {
        int j = 0, u = 0;
        for (int unit = blockIdx.x; unit < num_units; unit += gridDim.x) {
          const auto coords = coords_of(unit);
          if (coords.block.row_count == 0) continue;
          const KvPair kv = sm.pair(u++);
          kv.empty->wait(kv.phase ^ 1);
          kv.full->arrive_expect_tx(2 * Cfg::kSlotBytes);
          load_kv(coords, kv);
#pragma unroll 1
          for (int n = 0; n < kTensorsPerHead * group_size; ++n, ++j) {
            const auto slot = RingSlot<Cfg::kSlots>::of(j);
            sm.ring.empty[slot.stage].wait(slot.empty_parity());
            sm.ring.full[slot.stage].arrive_expect_tx(Cfg::kSlotBytes);  // rows past T are zero-filled but counted
            load_head(coords, n, sm.ring.base + slot.stage * Cfg::kSlotBytes, sm.ring.full[slot.stage]);
          }
        }
      },
      [&](int consumer) BLOCKATTN_INLINE {
        int first = 0, u = 0;
        for (int unit = blockIdx.x; unit < num_units; unit += gridDim.x) {
          const auto coords = coords_of(unit);
          if (coords.block.row_count == 0) continue;
          op(coords, u++, first, consumer);
          first += kTensorsPerHead * group_size;
        }
        finish();
      });
}

// Static shared memory run_alternate_units takes for its published pairs,
// which its configs leave beside their ring (TensorRingBudget).
inline constexpr int kAlternateUnitsStaticBytes = 1024;

// The frame whose consumers take alternate units, each whole
// (GroupedBackwardConfig::kOwnWalks: a group of one on many blocks, and
// grouped heads at D = 64). The CTA walks unit pairs: its first
// kKvPairs / 2 statically (blockIdx.x, blockIdx.x + gridDim.x, ...), then
// chunks of that many claimed at run time (schedule::ChunkClaimingWalk, the
// walk tests/cpu/cta_walk_test.cpp checks); pair q is table entries 2q and
// 2q + 1 (with an even head count, heads 2j and 2j + 1 of one block), and
// the CTA's k-th pair's entry 2q + c is its unit i = 2k + c, consumer c's,
// which the producer publishes to it (the pairs ring below). The producer
// issues both units' K and V, then both dO, then both Q, back to back, so
// that a head's 128-byte row pieces and its neighbour's are read (and, by
// the two consumers, written) together, as D = 128's two column chunks are:
// 92% of copy where one head at a time read 89 (perf.md, "Heads in pairs").
// Each consumer reads only its own entries.
//
// With a group of one, unit i's dO and Q are tensors 2i and 2i + 1 of the
// ring's stream; its K and V are pair i % kKvPairs. An empty entry (an empty
// tile of the table, or the missing partner of a lone last unit) still takes
// its slots and pair, landed with no bytes (the producer arrives without a
// transaction count), and its owner waits for them and hands them back like
// any unit's (op sees the empty coords), so that every barrier's phases
// advance in step.
//
// Deadlock check: with an even slot count per unit pair and an even pair
// count, a slot's and a pair's previous user is unit i - kSlots / 2 or
// i - kKvPairs, of the same parity: the same consumer's, released before
// that consumer waits for unit i. So each consumer waits only on its own
// slots and pairs, in order, and the producer only on releases of units
// earlier in its order, each by the consumer that owns it. Unlike
// run_grouped_ring with alternate units, where both consumers wait for every
// tensor and the slots must outnumber the pairs' units, any pair count works.
//
// Units of `group_size` heads: the producer issues a pair's K and V, then
// head by head both units' dO and Q. Tensor n of head g of the pair's unit c
// is the stream's kHeadTensors (2 (k G + g) + c) + n, so consumer c's heads
// are 2 kHeadTensors apart (op's `first` is its first head's), and a slot's
// previous user is still the same consumer's (the same static_assert).
template <typename Cfg, typename Smem, typename CoordsOf, typename LoadKv, typename LoadHead, typename UnitOp,
          typename Finish>
__device__ __forceinline__ void run_alternate_units(const Smem& sm, int num_units, int group_size,
                                                    schedule::TileClaims* claims, CoordsOf&& coords_of,
                                                    LoadKv&& load_kv, LoadHead&& load_head, UnitOp&& op,
                                                    Finish&& finish) {
  static_assert(Cfg::kConsumers == 2 && Cfg::kSlots % (2 * kHeadTensors) == 0 && Cfg::kKvPairs % 2 == 0,
                "a slot's and a pair's previous unit is the same consumer's");
  if (threadIdx.x == 0) {
    sm.init_barriers();
    fence_barrier_init();
  }
  __syncthreads();
  const int num_pairs = (num_units + 1) / 2;
  auto entry = [&](int unit) BLOCKATTN_INLINE {  // one past the table: the lone last unit's empty partner
    auto coords = coords_of(unit < num_units ? unit : num_units - 1);
    if (unit >= num_units) coords.block.row_count = 0;
    return coords;
  };
  // Lands `bytes` on `full` by issue(), or, for an empty entry, arrives with none.
  auto land = [](Barrier& full, bool empty, uint32_t bytes, auto&& issue) BLOCKATTN_INLINE {
    if (empty) {
      full.arrive();
    } else {
      full.arrive_expect_tx(bytes);  // rows past T are zero-filled but counted
      issue();
    }
  };
  // The unit pairs past each CTA's first kKvPairs / 2 are claimed at run
  // time, a chunk of that many at a time (schedule::ChunkClaimingWalk), so
  // that SMs that finish early take more (H200 headline-d64 backward 90.4 ->
  // 96.7% of copy, docs/perf.md "Session 39"). The producer publishes each
  // pair it takes (its two entries, or an end mark) in a ring of kEntries
  // entries with a barrier each; each consumer reads the next entry after
  // its unit op. Entry k's next write, at pair k + kEntries, comes after the
  // producer's waits (in pair k + kEntries - 1) on the releases of the K and
  // V of pair k + kEntries - 1 - kKvPairs / 2 >= k, by both consumers, each
  // of which read entry k before its unit op k (lane 0 reads, and lane 0 is
  // its warp's releaser): so no entry is overwritten before both have read it.
  using Coords = decltype(entry(0));
  constexpr int kEntries = Cfg::kKvPairs;
  constexpr int kChunk = Cfg::kKvPairs / 2;
  struct PublishedPairs {
    Barrier posted[kEntries];
    int pair[kEntries];
    alignas(16) unsigned char units[kEntries][2][sizeof(Coords)];
  };
  static_assert(kEntries >= Cfg::kKvPairs / 2 + 1, "an entry read before the releases that let it be rewritten");
  static_assert(sizeof(PublishedPairs) <= kAlternateUnitsStaticBytes,
                "the published pairs do not fit their room beside the ring (the config's TensorRingBudget)");
  __shared__ PublishedPairs published;
  if (threadIdx.x == 0) {
    for (int e = 0; e < kEntries; ++e)
      published.posted[e].init(1);
    fence_barrier_init();
  }
  __syncthreads();
  split_roles<Cfg>(
      [&]() BLOCKATTN_INLINE {
        auto claim = [&] { return schedule::claim_tile(claims, 0); };
        schedule::ChunkClaimingWalk<1, kChunk> walk(blockIdx.x, gridDim.x, claim);
        for (int k = 0;; ++k) {
          const int q = walk.next(num_pairs, claim);
          const int e = k % kEntries;
          published.pair[e] = q;
          if (q >= num_pairs) {
            published.posted[e].arrive();
            break;
          }
          const Coords units[2] = {entry(2 * q), entry(2 * q + 1)};
          memcpy(published.units[e][0], &units[0], sizeof(Coords));
          memcpy(published.units[e][1], &units[1], sizeof(Coords));
          published.posted[e].arrive();
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const auto& coords = units[c];
            const KvPair kv = sm.pair(2 * k + c);
            kv.empty->wait(kv.phase ^ 1);
            land(*kv.full, coords.block.row_count == 0, 2 * Cfg::kSlotBytes, [&] { load_kv(coords, kv); });
          }
#pragma unroll 1
          for (int g = 0; g < group_size; ++g)
#pragma unroll
            for (int n = 0; n < kHeadTensors; ++n)
#pragma unroll
              for (int c = 0; c < 2; ++c) {
                const auto& coords = units[c];
                const auto slot = RingSlot<Cfg::kSlots>::of(kHeadTensors * (2 * (k * group_size + g) + c) + n);
                Barrier& full = sm.ring.full[slot.stage];
                sm.ring.empty[slot.stage].wait(slot.empty_parity());
                land(full, coords.block.row_count == 0, Cfg::kSlotBytes, [&] {
                  load_head(coords, kHeadTensors * g + n, sm.ring.base + slot.stage * Cfg::kSlotBytes, full);
                });
              }
        }
        schedule::count_out(claims);  // the producer is the CTA's only claimer
      },
      [&](int consumer) BLOCKATTN_INLINE {
        // Entry k as consumer `consumer` reads it: lane 0 waits, reads and
        // hands it to its warp. pair >= num_pairs: the end mark.
        auto read = [&](int k, int& pair) BLOCKATTN_INLINE {
          const int e = k % kEntries;
          const bool reader = threadIdx.x % 32 == 0;
          Coords unit{};
          pair = 0;
          if (reader) {
            published.posted[e].wait((k / kEntries) & 1);
            pair = published.pair[e];
            if (pair < num_pairs) memcpy(&unit, published.units[e][consumer], sizeof(Coords));
          }
          pair = __shfl_sync(~0u, pair, 0);
          return lane0_copy(unit);
        };
        // Read after the unit op, not ahead of it: with grouped heads a
        // pair's tensors outnumber the slots, so the producer's loads of
        // pair k (and its publishing of pair k + 1 after them) wait on
        // releases inside op k.
        int pair = 0;
        auto coords = read(0, pair);
        for (int k = 0; pair < num_pairs; ++k) {
          op(coords, 2 * k + consumer, kHeadTensors * (2 * k * group_size + consumer), consumer);
          coords = read(k + 1, pair);
        }
        finish();
      });
}

}  // namespace blockattn::sm90
