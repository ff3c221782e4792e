// The frame every sm90 kernel runs in: a persistent, warp-specialized CTA of
// one producer warpgroup and Cfg::kConsumers consumer warpgroups around a ring
// of Cfg::kStages shared-memory stages.
//
//   producer (thread 0 of warpgroup 0): for each of the CTA's tiles, waits
//     until the tile's stage is free and calls load(coords, stage,
//     full_barrier), which announces the bytes it loads on the barrier and
//     issues the TMA copies (loader.cuh);
//   consumer c (warpgroup 1 + c): takes every kConsumers-th of the CTA's
//     tiles, waits until its stage has landed, calls op(coords, stage) and
//     hands the stage back.
// A kernel is this frame (run_frame) + a loader + a tile operation.
#pragma once

#include <cuda/std/utility>

#include "schedule/cta_walk.h"
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

// Runs `producer()` on thread 0 of warpgroup 0 and `consumer(c)` on
// warpgroup 1 + c, each role with its register budget (setmaxnreg: one role
// per branch). The caller has initialized its barriers and synchronized.
template <typename Cfg, typename Producer, typename Consumer>
__device__ __forceinline__ void split_roles(Producer&& producer, Consumer&& consumer) {
  // setmaxnreg.inc waits for registers that other warps of the CTA released:
  // the budgets must fit what the CTA was launched with (64K registers over
  // its threads, per thread a multiple of 8), or the consumers wait forever.
  constexpr uint32_t kLaunchRegs = (65536 / Cfg::kThreads) / 8 * 8;
  static_assert(128 * Cfg::kProducerRegs + (Cfg::kThreads - 128) * Cfg::kConsumerRegs <= kLaunchRegs * Cfg::kThreads,
                "register budgets exceed the CTA's launch allocation: setmaxnreg.inc would deadlock");
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    set_max_registers_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) producer();
  } else {
    set_max_registers_inc<Cfg::kConsumerRegs>();
    consumer(warpgroup - 1);
  }
}

// Where consumers share stages (kStages not a multiple of kConsumers), the
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
inline constexpr bool kSharedStages = Cfg::kStages % Cfg::kConsumers != 0;
template <typename Cfg>
inline constexpr bool kPerThreadRelease = kSharedStages<Cfg> || Cfg::kReleasePerThread;
template <typename Cfg>
inline constexpr int kReleasesPerStage = kPerThreadRelease<Cfg> ? 128 : 4;

// Initializes the ring's barriers (a stage is released by the consumer that
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
__device__ __forceinline__ void release_stage(Barrier& empty, int lane) {
  fence_async_shared();
  __syncwarp();
  if (lane == 0) empty.arrive();
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

// A walk's reader of the schedule: tiles are asked for in the walk's order
// first, first + stride, ... With kReadAhead each call also starts the read
// of the walk's next tile, so that global load (1-2 us on L2 under a
// saturated memory system) lands during this tile's turn instead of at the
// next one's start. Who reads ahead is measured, not assumed (docs/perf.md,
// "Reading the schedule a tile ahead"): the forward's consumers gain up to
// 3.4 points of copy bandwidth; the backward's consumers lose headline-d64
// 4; the producer reading ahead loses the forward 3 and gains the backward
// nothing.
template <bool kReadAhead, typename CoordsOf>
struct ScheduleReader {
  using Coords = decltype(cuda::std::declval<CoordsOf&>()(0));
  CoordsOf& coords_of;
  int stride, num_tiles;
  Coords next{};

  __device__ ScheduleReader(CoordsOf& coords_of_, int first, int stride_, int num_tiles_)
      : coords_of(coords_of_), stride(stride_), num_tiles(num_tiles_) {
    if (kReadAhead && first < num_tiles) next = coords_of(first);
  }
  __device__ Coords operator()(int tile) {
    if constexpr (!kReadAhead) {
      return coords_of(tile);
    } else {
      const Coords coords = next;
      if (tile + stride < num_tiles) next = coords_of(tile + stride);
      return coords;
    }
  }
};

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
                "a consumer's tiles one stride apart (consume_tiles)");
  return schedule::cta_tile(Cfg::kNeighbourTiles, blockIdx.x, gridDim.x, i);
}
template <typename Cfg>
__device__ __forceinline__ int cta_tile_step(int i) {
  return schedule::cta_tile_step(Cfg::kNeighbourTiles, gridDim.x, i);
}

// The producer's walk over the CTA's tiles (cta_tile).
// Where the table may hold empty entries (Cfg::kEmptyEntries: the packed
// tiles table of the backward and of the short-sequence forward), an empty
// one still takes its ring slot, unloaded, so that producer and consumers
// keep counting slots alike; the check is compiled only there (as a run-time
// branch in the forward's loop it cost the D = 64 forward 4% on
// partial-heavy batches, docs/perf.md).
template <typename Cfg, typename CoordsOf, typename Load>
__device__ __forceinline__ void produce_tiles(Barrier* full, Barrier* empty, int num_tiles, CoordsOf&& coords_of,
                                              Load&& load) {
  int i = 0;
  for (int tile = cta_tile<Cfg>(0); tile < num_tiles; tile += cta_tile_step<Cfg>(i), ++i) {
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    empty[slot.stage].wait(slot.empty_parity());
    const auto coords = coords_of(tile);  // after the wait: read earlier, it cost the forward 3% (ScheduleReader)
    if (Cfg::kEmptyEntries && coords.block.row_count == 0) {  // packed into an earlier tile: the slot passes, unloaded
      full[slot.stage].arrive();
      continue;
    }
    load(coords, slot.stage, full[slot.stage]);
  }
}

// Consumer c's walk: the CTA's tiles c, c + kConsumers, ... in the producer's order,
// each kConsumers * gridDim.x after the one before (cta_tile).
template <typename Cfg, typename CoordsOf, typename TileOp>
__device__ __forceinline__ void consume_tiles(Barrier* full, Barrier* empty, int num_tiles, int consumer,
                                              CoordsOf&& coords_of, TileOp&& op) {
  static_assert(Cfg::kStages > Cfg::kConsumers || !kSharedStages<Cfg>,
                "the wait on the previous release below needs more stages than consumers");
  const int first = cta_tile<Cfg>(consumer), stride = Cfg::kConsumers * gridDim.x;
  ScheduleReader<Cfg::kConsumersReadAhead, CoordsOf> schedule(coords_of, first, stride, num_tiles);
  int i = consumer;
  for (int tile = first; tile < num_tiles; tile += stride, i += Cfg::kConsumers) {
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    const auto coords = schedule(tile);  // read a tile ahead, or now (overlapping the waits below)
    if constexpr (kSharedStages<Cfg>) {
      // Stages are shared between consumers (e.g. 5 stages, 3 consumers), so
      // this consumer can reach tile i while the stage still holds tile
      // i - kStages of another consumer, its data not even landed: the full
      // barrier is then one phase behind, and a parity wait cannot tell
      // "phase of tile i - kStages pending" from "phase of tile i done"; it
      // would return at once and the tile op would read (and release) the
      // wrong data. Waiting first for that tile's release (the producer's
      // own wait) puts the full barrier within one phase. That wait cannot
      // alias either: our previous tile, i - kConsumers, was loaded after
      // tile i - kStages, so the release before that one is done. With fixed
      // stages per consumer the previous tile of a stage is this consumer's.
      empty[slot.stage].wait(slot.empty_parity());
    }
    full[slot.stage].wait(slot.full_parity());
    if (!Cfg::kEmptyEntries || coords.block.row_count > 0) op(coords, slot.stage);
    release_consumer_stage<Cfg>(empty[slot.stage], threadIdx.x % 32);
  }
}

// The whole frame for `num_tiles` tiles: the producer runs
// load(coords, stage, full_barrier) per tile, consumer c runs
// op(coords, stage, c) per tile it takes. The consumers read their
// coordinates with consumer_coords_of: the producer's, plus what the tile
// op's hooks look up per tile (hooks.cuh, look_ahead), so that those global
// reads land while the consumer waits for the tile's data; the producer,
// whose TMA issue they would delay, does without.
template <typename Cfg, typename CoordsOf, typename ConsumerCoordsOf, typename Load, typename TileOp>
__device__ __forceinline__ void run_frame(Barrier* full, Barrier* empty, int num_tiles, CoordsOf&& coords_of,
                                          ConsumerCoordsOf&& consumer_coords_of, Load&& load, TileOp&& op) {
  run_warp_specialized<Cfg>(
      full, empty, [&]() BLOCKATTN_INLINE { produce_tiles<Cfg>(full, empty, num_tiles, coords_of, load); },
      [&](int consumer) BLOCKATTN_INLINE {
        consume_tiles<Cfg>(full, empty, num_tiles, consumer, consumer_coords_of,
                           [&](const auto& coords, int stage) BLOCKATTN_INLINE { op(coords, stage, consumer); });
      });
}

}  // namespace blockattn::sm90
