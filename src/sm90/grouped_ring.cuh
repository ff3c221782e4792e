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

#include "sm90/tensor_ring.cuh"

namespace blockattn::sm90 {

// A head's tensors in the ring, in release order (both after its last products).
enum GroupedHeadTensor : int { kHeadDout = 0, kHeadQ = 1, kHeadTensors = 2 };

// A unit's K and V: pair u % 2 of the CTA's u-th unit, with its barriers.
struct KvPair {
  unsigned char* k;
  unsigned char* v;
  Barrier* full;   // producer -> consumers: K and V have landed
  Barrier* empty;  // consumers -> producer: every consumer warp is done with both
  uint32_t phase;
};

// The whole frame for `num_units` units (unit = blockIdx.x + i * gridDim.x)
// of `group_size` heads: the producer runs load_kv(coords, pair) once per
// unit and load_head(coords, n, slot, full_barrier) for tensor n % 2 of head
// n / 2; every consumer warpgroup c runs op(coords, u, first, c) for the
// CTA's u-th unit, `first` being its first tensor in the ring's stream, and
// finish() once after its last (what must be done before the CTA exits).
// `Smem` has the ring, pair(u) and init_barriers() (thread 0, before the
// roles split: the ring's, the pairs' and any of the unit op's own). Empty
// entries of the tiles table take nothing, on both sides alike.
template <typename Cfg, typename Smem, typename CoordsOf, typename LoadKv, typename LoadHead, typename UnitOp,
          typename Finish>
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
          for (int n = 0; n < kHeadTensors * group_size; ++n, ++j) {
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
          first += kHeadTensors * group_size;
        }
        finish();
      });
}

// The frame for a group of one whose consumers take alternate units
// (GroupedBackwardConfig::kOwnWalks): consumer c runs the CTA's entries
// i = c, c + 2, ... of its walk, i counting every entry of the tiles table,
// empty ones too, and reads only its own entries, each one ahead of use.
// Unit i's dO and Q are tensors 2i and 2i + 1 of the ring's stream, its K and
// V pair i % kKvPairs; an empty entry still takes its slots and pair, landed
// with no bytes (the producer arrives without a transaction count), and its
// owner waits for them and hands them back like any unit's (op sees the
// empty coords), so that every barrier's phases advance in step.
//
// Deadlock check: with an even slot count per unit pair and an even pair
// count, a slot's and a pair's previous user is unit i - kSlots / 2 or
// i - kKvPairs, of the same parity: the same consumer's, released before
// that consumer waits for unit i. So each consumer waits only on its own
// slots and pairs, in order, and the producer only on releases of units
// earlier in its order, each by the consumer that owns it. Unlike
// run_grouped_ring with alternate units, where both consumers wait for every
// tensor and the slots must outnumber the pairs' units, any pair count works.
template <typename Cfg, typename Smem, typename CoordsOf, typename LoadKv, typename LoadHead, typename UnitOp,
          typename Finish>
__device__ __forceinline__ void run_alternate_units(const Smem& sm, int num_units, CoordsOf&& coords_of,
                                                    LoadKv&& load_kv, LoadHead&& load_head, UnitOp&& op,
                                                    Finish&& finish) {
  static_assert(Cfg::kConsumers == 2 && Cfg::kSlots % (2 * kHeadTensors) == 0 && Cfg::kKvPairs % 2 == 0,
                "a slot's and a pair's previous unit is the same consumer's");
  if (threadIdx.x == 0) {
    sm.init_barriers();
    fence_barrier_init();
  }
  __syncthreads();
  // visit(coords, k) for entries first, first + stride, ... (the k-th), the
  // next entry's coords read while this one is visited.
  auto walk = [&](int first, int stride, auto&& visit) BLOCKATTN_INLINE {
    if (first >= num_units) return;
    auto next = coords_of(first);
    for (int unit = first, k = 0; unit < num_units; unit += stride, ++k) {
      const auto coords = next;
      if (unit + stride < num_units) next = coords_of(unit + stride);
      visit(coords, k);
    }
  };
  split_roles<Cfg>(
      [&]() BLOCKATTN_INLINE {
        walk(blockIdx.x, gridDim.x, [&](const auto& coords, int i) BLOCKATTN_INLINE {
          const bool empty = coords.block.row_count == 0;
          const KvPair kv = sm.pair(i);
          kv.empty->wait(kv.phase ^ 1);
          if (empty) {
            kv.full->arrive();
          } else {
            kv.full->arrive_expect_tx(2 * Cfg::kSlotBytes);
            load_kv(coords, kv);
          }
#pragma unroll
          for (int n = 0; n < kHeadTensors; ++n) {
            const auto slot = RingSlot<Cfg::kSlots>::of(kHeadTensors * i + n);
            sm.ring.empty[slot.stage].wait(slot.empty_parity());
            if (empty) {
              sm.ring.full[slot.stage].arrive();
            } else {
              sm.ring.full[slot.stage].arrive_expect_tx(Cfg::kSlotBytes);  // rows past T are zero-filled but counted
              load_head(coords, n, sm.ring.base + slot.stage * Cfg::kSlotBytes, sm.ring.full[slot.stage]);
            }
          }
        });
      },
      [&](int consumer) BLOCKATTN_INLINE {
        walk(blockIdx.x + consumer * gridDim.x, 2 * gridDim.x, [&](const auto& coords, int k) BLOCKATTN_INLINE {
          const int i = 2 * k + consumer;
          op(coords, i, kHeadTensors * i, consumer);
        });
        finish();
      });
}

}  // namespace blockattn::sm90
