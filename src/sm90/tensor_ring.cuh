// The frame of kernels whose tiles are shared by all consumer warpgroups (the
// backward at 128-token blocks, shared_tile_backward.cuh): a persistent,
// warp-specialized CTA whose producer streams each tile's tensors one by one
// through a ring of single-tensor slots, and whose consumers all work on
// every tile together, each warp releasing a tensor as soon as no product of
// its warpgroup reads it any more.
//
// Why not frame.cuh's ring of whole tiles: a 128-row tile of Q, K, V and dO
// is 128 KB at D = 128, so beside the 64 KB of P and dS only one would fit
// and nothing could load while a tile computes. With one tensor per slot the
// next tile's tensors land in the slots the current tile has released
// (V once S and dP are done, K once dQ is, ...).
//
// Tensor j of the CTA's stream (the n-th of its i-th tile: j = kTensors i + n)
// lives in slot j % kSlots. The producer loads a tile's tensors in the order
// the tile releases them, so the ring stays first-in, first-out: a slot is
// reused after the tensor released earliest, never one held to the end.
// Every consumer waits for every tensor in stream order, which keeps each
// full barrier within one phase of the tensor waited for (no parity aliasing,
// unlike the shared stages of frame.cuh's consume_tiles).
//
// A prepared ring (kPrepared) has a third role: the producer warpgroup's
// three idle warps take each tile as it lands, rewrite its tensors in place
// (the rotary prologue) and mark them `ready`, which the consumers wait for
// instead of `full`. The preparation of the next tiles then runs under the
// consumers' products. Preparers walk the stream in order too: a slot's
// `full` cannot run a phase ahead of them (its refill waits for the
// consumers' release, which waits for their `ready`), nor `ready` ahead of
// the consumers.
#pragma once

#include "sm90/frame.cuh"

namespace blockattn::sm90 {

// How many one-tensor slots fit beside a kernel's scratch in the 227 KB of
// shared memory a CTA may have (1 KB of alignment slack, the ring's
// kBarriersPerSlot barriers a slot in kBarrierRoom, which caps the ring at 16
// slots with two (full, empty) and 10 with a prepared ring's three (and
// ready), and kStaticBytes of the frame's static shared memory:
// run_alternate_units' published pairs), and the CTA's dynamic shared-memory
// size.
template <int kSlotBytes, int kScratchBytes, int kStaticBytes = 0, int kBarriersPerSlot = 2>
struct TensorRingBudget {
  static constexpr int kSmemLimit = 227 * 1024 - kStaticBytes, kBarrierRoom = 256;
  static constexpr int kFit = (kSmemLimit - 1024 - kScratchBytes - kBarrierRoom) / kSlotBytes;
  static constexpr int kMaxSlots = kBarrierRoom / (kBarriersPerSlot * static_cast<int>(sizeof(Barrier)));
  static constexpr int kSlots = kFit < kMaxSlots ? kFit : kMaxSlots;
  static constexpr int kSmemBytes = 1024 /* alignment slack */ + kSlots * kSlotBytes + kScratchBytes +
                                    kBarriersPerSlot * kSlots * static_cast<int>(sizeof(Barrier));
  static_assert(kBarriersPerSlot * kSlots * sizeof(Barrier) <= kBarrierRoom);
};

template <int kSlots, int kBytesPerSlot, bool kPreparedSlots = false>
struct TensorRing {
  static constexpr int kSlotCount = kSlots, kSlotBytes = kBytesPerSlot;
  static constexpr bool kPrepared = kPreparedSlots;
  static constexpr int kPreparers = 96;  // warpgroup 0's warps 1-3 (split_roles' helpers)
  unsigned char* base;                   // kSlots slots of kSlotBytes, 1024-byte aligned
  Barrier* full;                         // producer -> preparers, or consumers: the slot's tensor has landed
  Barrier* empty;                        // consumers -> producer: every consumer warp is done with it
  Barrier* ready;  // kPrepared: preparers -> consumers: the tensor is prepared (each preparer thread)

  __device__ unsigned char* data(int j) const { return base + RingSlot<kSlots>::of(j).stage * kSlotBytes; }
};

// One tile's view of the ring: its tensors n = 0 .. kTensors - 1, tensor
// `first` + n of the stream.
template <typename Ring>
struct TileTensors {
  static constexpr bool kPrepared = Ring::kPrepared;
  static constexpr int kPreparers = Ring::kPreparers;
  const Ring& ring;
  int first;

  template <typename T>
  __device__ T* data(int n) const {
    return reinterpret_cast<T*>(ring.data(first + n));
  }
  // The consumers' wait: tensor n is there (and prepared, in a prepared ring).
  __device__ void wait(int n) const {
    const auto slot = RingSlot<Ring::kSlotCount>::of(first + n);
    (Ring::kPrepared ? ring.ready : ring.full)[slot.stage].wait(slot.full_parity());
  }
  // A preparer's: tensor n has landed; and its hand-over, after its writes
  // to the slot and the proxy fence that orders them before the products.
  __device__ void wait_landed(int n) const {
    const auto slot = RingSlot<Ring::kSlotCount>::of(first + n);
    ring.full[slot.stage].wait(slot.full_parity());
  }
  __device__ void mark_ready(int n) const { ring.ready[RingSlot<Ring::kSlotCount>::of(first + n).stage].arrive(); }
  __device__ Barrier& empty(int n) const { return ring.empty[RingSlot<Ring::kSlotCount>::of(first + n).stage]; }
  // A warp hands tensor n back (frame.cuh's release_stage: its generic writes
  // to the slot, the zeroed tail rows, come before the next TMA write).
  __device__ void release(int n, int lane) const { release_stage(empty(n), lane); }
};

// A head's kTensors tensors in the grouped kernel's ring (grouped_ring.cuh)
// at consecutive stages of one phase: a head's first tensor is a multiple of
// kTensors into the stream and the slot count is too, so no head wraps
// around the ring's end. Found once a unit, then advanced head by head with
// an add and a wrap, where TileTensors divides by the slot count (12 slots:
// a multiply-high and its fix-ups) at every access.
template <typename Ring, int kTensors>
struct HeadSlots {
  static_assert(Ring::kSlotCount % kTensors == 0, "a head never wraps around the ring's end");
  const Ring* ring;
  int stage;  // tensor 0's
  uint32_t phase;

  __device__ static HeadSlots at(const Ring& ring, int first) {
    const auto slot = RingSlot<Ring::kSlotCount>::of(first);
    return {&ring, slot.stage, slot.phase};
  }
  // The head `stride` tensors further on the stream (stride <= kSlotCount).
  __device__ HeadSlots advanced(int stride) const {
    const int next = stage + stride;
    const bool wraps = next >= Ring::kSlotCount;
    return {ring, wraps ? next - Ring::kSlotCount : next, phase ^ static_cast<uint32_t>(wraps)};
  }
  template <typename T>
  __device__ T* data(int n) const {
    return reinterpret_cast<T*>(ring->base + (stage + n) * Ring::kSlotBytes);
  }
  __device__ void wait(int n) const { ring->full[stage + n].wait(phase); }
  // The grouped unit's hand-back: its only generic writes to a slot, the
  // zeroed tails, were fenced when made (frame.cuh's release_fenced_stage).
  __device__ void release_fenced(int n, int lane) const { release_fenced_stage(ring->empty[stage + n], lane); }
};

// The whole frame for `num_tiles` tiles (the CTA's i-th is cta_tile(i),
// frame.cuh, which reads Cfg::kNeighbourTiles):
// the producer runs load(coords, n, slot, full_barrier) for tensor n of each
// tile, every consumer warpgroup c runs op(coords, TileTensors, c) on every
// tile, and in a prepared ring the preparers prepare(coords, TileTensors,
// tid) before them. Empty entries of the tiles table (a sequence packed into
// an earlier tile) take no slots, on every side alike.
template <typename Cfg, typename Ring, typename CoordsOf, typename Load, typename Prepare, typename TileOp>
__device__ __forceinline__ void run_tensor_ring(const Ring& ring, int num_tiles, CoordsOf&& coords_of, Load&& load,
                                                Prepare&& prepare, TileOp&& op) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kSlots; ++s) {
      ring.full[s].init(1);
      ring.empty[s].init(4 * Cfg::kConsumers);  // every warp of every consumer reads every tensor
      if constexpr (Ring::kPrepared) ring.ready[s].init(Ring::kPreparers);
    }
    fence_barrier_init();
  }
  __syncthreads();
  // Each role's walk over the CTA's tiles, passing over empty entries.
  auto for_each_tile = [&](auto&& f) BLOCKATTN_INLINE {
    int first = 0, i = 0;
    for (int tile = cta_tile<Cfg>(0); tile < num_tiles; tile += cta_tile_step<Cfg>(i), ++i) {
      const auto coords = coords_of(tile);
      if (coords.block.row_count == 0) continue;
      f(coords, TileTensors<Ring>{ring, first});
      first += Cfg::kTensors;
    }
  };
  split_roles<Cfg>(
      [&]() BLOCKATTN_INLINE {
        int j = 0, i = 0;
        for (int tile = cta_tile<Cfg>(0); tile < num_tiles; tile += cta_tile_step<Cfg>(i), ++i) {
          const auto coords = coords_of(tile);
          if (coords.block.row_count == 0) continue;
#pragma unroll 1
          for (int n = 0; n < Cfg::kTensors; ++n, ++j) {
            const auto slot = RingSlot<Cfg::kSlots>::of(j);
            ring.empty[slot.stage].wait(slot.empty_parity());
            ring.full[slot.stage].arrive_expect_tx(Cfg::kSlotBytes);  // rows past T are zero-filled but still counted
            load(coords, n, ring.base + slot.stage * Cfg::kSlotBytes, ring.full[slot.stage]);
          }
        }
      },
      [&](int tid) BLOCKATTN_INLINE {
        if constexpr (Ring::kPrepared)
          for_each_tile([&](const auto& coords, const TileTensors<Ring>& tensors)
                            BLOCKATTN_INLINE { prepare(coords, tensors, tid); });
      },
      [&](int consumer) BLOCKATTN_INLINE {
        for_each_tile([&](const auto& coords, const TileTensors<Ring>& tensors)
                          BLOCKATTN_INLINE { op(coords, tensors, consumer); });
      });
}

}  // namespace blockattn::sm90
