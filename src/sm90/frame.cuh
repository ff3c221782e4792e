// The frame every sm90 kernel runs in: a persistent, warp-specialized CTA of
// one producer warpgroup and Cfg::kConsumers consumer warpgroups around a ring
// of Cfg::kStages shared-memory stages.
//
//   producer (thread 0 of warpgroup 0): for each of the CTA's tiles (the
//     first ring's worth static, the rest claimed at run time:
//     schedule/cta_walk.h's ChunkClaimingWalk; the packed table's empty
//     entries passed over), waits until the tile's stage is free,
//     publishes the tile's coordinates beside the stage and
//     calls load(coords, stage, full_barrier), which announces the bytes it
//     loads on the barrier and issues the TMA copies (loader.cuh);
//   consumer c (warpgroup 1 + c): takes every kSlotGroups-th of the CTA's
//     slots, waits until its stage has landed, calls op(coords, stage) with
//     the coordinates published there and hands the stage back. Where a
//     slot carries several tiles (Cfg::kConsumersPerSlot: the D = 64
//     forward's head pairs), that many consumers form a slot group and take
//     the same slots, one tile of each.
// A kernel is this frame (run_frame) + a loader + a tile operation.
#pragma once

#include <cuda/std/utility>

#include "schedule/cta_walk.h"
#include "schedule/tile_claims.cuh"
#include "sm90/sync.cuh"

// The lambdas that carry a tile's products through the frame are
// BLOCKATTN_INLINE. A call between a kernel and its wgmma instructions makes
// ptxas serialize every wgmma of the kernel (C7510, "wgmma pipeline crossing
// function boundary"; docs/perf.md, "Build time, and a call ptxas left in the
// sm_90 rotary backward"). nvcc inlines small lambdas by itself, but it left
// calls in the fp16 rotary backward at D = 96 and 128 (both block sizes) and
// in the rotary backward at D = 160 and 192.
#define BLOCKATTN_INLINE __attribute__((always_inline))

namespace blockattn::sm90 {

// Runs `producer()` on thread 0 of warpgroup 0, `helper(tid)` on warpgroup
// 0's other three warps (tid in [0, 96)), and `consumer(c)` on warpgroup
// 1 + c, each role with its register budget (setmaxnreg: one role per
// branch; the helpers live within the producer's). The caller has
// initialized its barriers and synchronized.
template <typename Cfg, typename Producer, typename Helper, typename Consumer>
__device__ __forceinline__ void split_roles(Producer&& producer, Helper&& helper, Consumer&& consumer) {
  // setmaxnreg.inc waits for registers that other warps of the CTA released:
  // the budgets must fit what the CTA was launched with (64K registers over
  // its threads, per thread a multiple of 8), or the consumers wait forever.
  constexpr uint32_t kLaunchRegs = (65536 / Cfg::kThreads) / 8 * 8;
  static_assert(128 * Cfg::kProducerRegs + (Cfg::kThreads - 128) * Cfg::kConsumerRegs <= kLaunchRegs * Cfg::kThreads,
                "register budgets exceed the CTA's launch allocation: setmaxnreg.inc would deadlock");
  // Through lane 0, so that the compiler knows it is warp-uniform: what a
  // consumer derives from its index (tile addresses, wgmma descriptors) can
  // then live in uniform registers, without a move into them per product.
  const int warpgroup = __shfl_sync(~0u, static_cast<int>(threadIdx.x / 128), 0);
  if (warpgroup == 0) {
    set_max_registers_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) producer();
    if (threadIdx.x >= 32) helper(static_cast<int>(threadIdx.x) - 32);
  } else {
    set_max_registers_inc<Cfg::kConsumerRegs>();
    consumer(warpgroup - 1);
  }
}
// The same where warpgroup 0's other warps idle.
template <typename Cfg, typename Producer, typename Consumer>
__device__ __forceinline__ void split_roles(Producer&& producer, Consumer&& consumer) {
  split_roles<Cfg>(producer, [](int) {}, consumer);
}

// Where consumers share stages (kStages not a multiple of kSlotGroups), the
// next consumer of a stage waits on its release too, and touches the stage
// with generic accesses (zeroing a partial tile's rows) right after. Each
// thread then releases for itself: with one arrival per warp after
// __syncwarp, the ordering of the other lanes' accesses rests on the warp
// barrier's cumulativity, which compute-sanitizer racecheck does not model
// (it reported ~25K hazards per case at D = 64 on short sequences; 0 with
// per-thread arrivals). A config whose tile op touches the stage across
// warps asks for the same with fixed stages too (Cfg::kReleasePerThread),
// where racecheck reported hazards with one arrival per warp: the forward on
// packed tiles (12), and every config of the per-consumer backward, whose
// zeroing of a partial tile crosses the rows other warps staged outputs in
// (14 races at D = 192) and whose dS^T may be read from V's buffer (24 at
// D = 64).
template <typename Cfg>
inline constexpr int kSlotGroups = Cfg::kConsumers / Cfg::kConsumersPerSlot;
template <typename Cfg>
inline constexpr bool kSharedStages = Cfg::kStages % kSlotGroups<Cfg> != 0;
template <typename Cfg>
inline constexpr bool kPerThreadRelease = kSharedStages<Cfg> || Cfg::kReleasePerThread;
template <typename Cfg>
inline constexpr int kReleasesPerStage = (kPerThreadRelease<Cfg> ? 128 : 4) * Cfg::kConsumersPerSlot;

// Initializes the ring's barriers (a stage is released by the consumers that
// read it: kReleasesPerStage arrivals), then runs `producer()` on
// warpgroup 0 and `consumer(c)` on warpgroup 1 + c, each role with its register
// budget (setmaxnreg: one role per branch).
template <typename Cfg, typename Producer, typename Consumer>
__device__ __forceinline__ void run_warp_specialized(Barrier* full, Barrier* empty, Producer&& producer,
                                                     Consumer&& consumer) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      full[s].init(1);
      empty[s].init(kReleasesPerStage<Cfg>);
    }
    fence_barrier_init();
  }
  __syncthreads();
  split_roles<Cfg>(producer, consumer);
}

// A consumer warp hands its stage back to the producer: its generic-proxy
// writes to the stage (zeroed tails, staged outputs) are ordered before the
// producer's next TMA writes to it.
//
// release_fenced_stage is the hand-back alone, for a stage the warp's lanes
// only read, or whose generic writes their writers already fenced (zeroed
// tails, read next by wgmma): the proxy fence costs a MEMBAR.ALL.CTA and a
// FENCE.VIEW.ASYNC.S per call, two calls per head in the grouped backward
// (docs/perf.md, "Session 47"). The arrival's release orders the lanes'
// completed reads.
__device__ __forceinline__ void release_fenced_stage(Barrier& empty, int lane) {
  __syncwarp();
  if (lane == 0) empty.arrive();
}
__device__ __forceinline__ void release_stage(Barrier& empty, int lane) {
  fence_async_shared();
  release_fenced_stage(empty, lane);
}

// A consumer's release of its stage (kPerThreadRelease above).
template <typename Cfg>
__device__ __forceinline__ void release_consumer_stage(Barrier& empty, int lane) {
  if constexpr (kPerThreadRelease<Cfg>) {
    fence_async_shared();
    empty.arrive();
  } else {
    release_stage(empty, lane);
  }
}

// The CTA's i-th tile (schedule/cta_walk.h). With Cfg::kNeighbourTiles = 1,
// tile = blockIdx.x + i * gridDim.x: neighbouring tiles (neighbouring heads
// of one block) go to neighbouring CTAs. With kNeighbourTiles = kConsumers,
// the CTA takes that many neighbouring tiles at a time (one per consumer in
// the per-tile frame, one after the other on the tensor ring, where both
// consumers work on every tile), so that the producer loads those heads'
// row pieces together.
template <typename Cfg>
__device__ __forceinline__ int cta_tile(int i) {
  static_assert(Cfg::kNeighbourTiles == 1 || Cfg::kNeighbourTiles == Cfg::kConsumers,
                "neighbour groups of one tile, or of one per consumer");
  return schedule::cta_tile(Cfg::kNeighbourTiles, blockIdx.x, gridDim.x, i);
}
template <typename Cfg>
__device__ __forceinline__ int cta_tile_step(int i) {
  return schedule::cta_tile_step(Cfg::kNeighbourTiles, gridDim.x, i);
}

// Lane 0's `value` in every lane of the warp (a trivially copyable type, a
// whole number of 32-bit words).
template <typename T>
__device__ __forceinline__ T lane0_copy(const T& value) {
  static_assert(sizeof(T) % 4 == 0, "shuffled as 32-bit words");
  uint32_t words[sizeof(T) / 4];
  memcpy(words, &value, sizeof(T));
  for (auto& w : words)
    w = __shfl_sync(~0u, w, 0);
  T out;
  memcpy(&out, words, sizeof(T));
  return out;
}

// The tiles a CTA's slots carry, published by the producer, which alone
// knows them (it claims them at run time): slot i's tile index and
// coordinates, written before the arrive on its full barrier (release) and
// read by its consumer after the wait (acquire). A tile index at or past
// num_tiles marks the end of the walk: the producer passes one to each
// consumer and loads nothing for it.
template <typename Cfg, typename Coords>
struct PublishedTiles {
  int tile[Cfg::kStages];
  // Raw bytes: a __shared__ variable may not have a constructor (Coords'
  // members have default initializers).
  alignas(16) unsigned char coords_bytes[Cfg::kStages][sizeof(Coords)];

  __device__ void set(int stage, const Coords& c) { memcpy(coords_bytes[stage], &c, sizeof(Coords)); }

  // A consumer warp's reads of slot `stage`: lane 0 alone reads and hands
  // the value to its warp, so that its own release of the stage orders the
  // read before the producer's next write of the slot. (Reads by the other
  // lanes would be ordered by __syncwarp and lane 0's release, which the PTX
  // model allows and racecheck does not model: it reported those as races
  // with the producer.)
  __device__ int warp_tile(int stage) const { return __shfl_sync(~0u, reader() ? tile[stage] : 0, 0); }
  __device__ Coords warp_coords(int stage) const {
    Coords c{};
    if (reader()) memcpy(&c, coords_bytes[stage], sizeof(Coords));
    return lane0_copy(c);
  }

 private:
  __device__ static bool reader() { return threadIdx.x % 32 == 0; }
};

// The producer's loop over its slots, its tiles claimed a ring's worth at a
// time (schedule::ChunkClaimingWalk; the first ring's worth is static).
// Where the table may hold empty entries (Cfg::kEmptyEntries: the packed
// tiles table of the backward and of the short-sequence forward: a third of
// tail-d64's entries), the producer passes over them and fills the slot with
// the next tile that has rows: the consumers learn each slot's tile from
// what is published, so an empty entry needs no slot, and every slot of the
// ring carries bytes. The check is compiled only there (as a run-time branch
// in the forward's loop it cost the D = 64 forward 4% on partial-heavy
// batches, docs/perf.md).
template <typename Cfg, typename Published, typename CoordsOf, typename Load>
__device__ __forceinline__ void produce_tiles(Barrier* full, Barrier* empty, int num_tiles,
                                              schedule::TileClaims* claims, Published& published, CoordsOf&& coords_of,
                                              Load&& load) {
  constexpr int kRing = (Cfg::kStages + Cfg::kNeighbourTiles - 1) / Cfg::kNeighbourTiles * Cfg::kNeighbourTiles;
  auto claim = [&] { return schedule::claim_tile(claims, 0); };
  schedule::ChunkClaimingWalk<Cfg::kNeighbourTiles, kRing> walk(blockIdx.x, gridDim.x, claim);
  for (int i = 0, ends = 0; ends < kSlotGroups<Cfg>; ++i) {
    int tile = walk.next(num_tiles, claim);
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    empty[slot.stage].wait(slot.empty_parity());
    // Read after the wait: read a tile ahead, it cost the forward 3% (docs/perf.md,
    // "Reading the schedule a tile ahead"); the next slot's, before its wait,
    // gained nothing on an H200 (session 37).
    decltype(coords_of(0)) coords{};
    for (; tile < num_tiles; tile = walk.next(num_tiles, claim)) {
      coords = coords_of(tile);
      if (!Cfg::kEmptyEntries || coords.block.row_count > 0) break;  // else packed into an earlier tile
    }
    published.tile[slot.stage] = tile;
    if (tile >= num_tiles) {  // this slot's consumers stop here
      full[slot.stage].arrive();
      ++ends;
      continue;
    }
    published.set(slot.stage, coords);
    load(coords, slot.stage, full[slot.stage]);
  }
  schedule::count_out(claims);  // the producer is the CTA's only claimer
}

// Consumer c's walk: its slot group g = c / kConsumersPerSlot takes the
// CTA's slots g, g + kSlotGroups, ..., each with the tile the producer
// published in it, until the end mark.
template <typename Cfg, typename Published, typename ConsumerCoordsFrom, typename TileOp>
__device__ __forceinline__ void consume_tiles(Barrier* full, Barrier* empty, int num_tiles, int consumer,
                                              const Published& published, ConsumerCoordsFrom&& consumer_coords_from,
                                              TileOp&& op) {
  static_assert(Cfg::kConsumers % Cfg::kConsumersPerSlot == 0, "whole slot groups");
  static_assert(Cfg::kStages > kSlotGroups<Cfg> || !kSharedStages<Cfg>,
                "the wait on the previous release below needs more stages than slot groups");
  for (int i = consumer / Cfg::kConsumersPerSlot;; i += kSlotGroups<Cfg>) {
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    if constexpr (kSharedStages<Cfg>) {
      // Stages are shared between consumers (e.g. 5 stages, 3 consumers), so
      // this consumer can reach slot i while the stage still holds slot
      // i - kStages of another consumer, its data not even landed: the full
      // barrier is then one phase behind, and a parity wait cannot tell
      // "phase of slot i - kStages pending" from "phase of slot i done"; it
      // would return at once and the tile op would read (and release) the
      // wrong data. Waiting first for that slot's release (the producer's
      // own wait) puts the full barrier within one phase. That wait cannot
      // alias either: our previous slot, i - kSlotGroups, was loaded after
      // slot i - kStages, so the release before that one is done. With fixed
      // stages per consumer the previous slot of a stage is this consumer's.
      empty[slot.stage].wait(slot.empty_parity());
    }
    full[slot.stage].wait(slot.full_parity());
    if (published.warp_tile(slot.stage) >= num_tiles) break;                  // the end mark: nothing to release
    op(consumer_coords_from(published.warp_coords(slot.stage)), slot.stage);  // never an empty entry
    release_consumer_stage<Cfg>(empty[slot.stage], threadIdx.x % 32);
  }
}

// The whole frame for `num_tiles` tiles, claimed at run time from `claims`:
// the producer runs load(coords, stage, full_barrier) per tile, consumer c
// runs op(coords, stage, c) per tile it takes. The consumers get the
// producer's coordinates through shared memory and add to them what the tile
// op's hooks look up per tile (consumer_coords_from: hooks.cuh's
// look_ahead), so that those global reads are the consumers', not the
// producer's, whose TMA issue they would delay.
template <typename Cfg, typename CoordsOf, typename ConsumerCoordsFrom, typename Load, typename TileOp>
__device__ __forceinline__ void run_frame(Barrier* full, Barrier* empty, int num_tiles, schedule::TileClaims* claims,
                                          CoordsOf&& coords_of, ConsumerCoordsFrom&& consumer_coords_from, Load&& load,
                                          TileOp&& op) {
  using Coords = decltype(coords_of(0));
  // Static shared memory beside the kernel's dynamic ring: a launch over
  // 227 KB a CTA would fail (the D = 192 backward's ring takes 225 KB).
  static_assert(Cfg::kSmemBytes + sizeof(PublishedTiles<Cfg, Coords>) <= 227 * 1024,
                "the published tiles do not fit beside the ring");
  __shared__ PublishedTiles<Cfg, Coords> published;
  run_warp_specialized<Cfg>(
      full, empty,
      [&]() BLOCKATTN_INLINE { produce_tiles<Cfg>(full, empty, num_tiles, claims, published, coords_of, load); },
      [&](int consumer) BLOCKATTN_INLINE {
        consume_tiles<Cfg>(full, empty, num_tiles, consumer, published, consumer_coords_from,
                           [&](const auto& coords, int stage) BLOCKATTN_INLINE { op(coords, stage, consumer); });
      });
}

}  // namespace blockattn::sm90
