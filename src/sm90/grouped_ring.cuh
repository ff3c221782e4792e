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

}  // namespace blockattn::sm90
