// Tiles claimed at run time by the CTAs of a persistent kernel, so that no SM
// is left with a tail of tiles while the others sit idle.
//
// The static walk (CTA c takes tiles c, c + grid, c + 2 grid, ...) gives every
// CTA the same number of tiles but not the same time: SMs do not get equal
// shares of DRAM bandwidth, and partial blocks are cheaper. ncu on the sm80
// forward at headdim-d256-h2 with the static walk: SM active cycles at least
// 75% and on average 94% of the kernel's elapsed cycles, where FA2 (one CTA
// per tile, the hardware handing out the next) kept every SM within 0.5% of
// 100% (docs/perf.md, "Session 35").
//
// A ClaimedWalk gives a CTA its first kAhead tiles from the static walk, known
// before any claim returns so that the first loads go out at once, and every
// later one from a counter in the schedule's workspace header, claimed kAhead
// iterations before its use. Claims come back in increasing order, so a
// CTA's tiles increase and its walk ends at its first tile past the table.
// The sm90 frame's producer claims a ring's worth of consecutive tiles at a
// time, a chunk ahead (cta_walk.h's ChunkClaimingWalk); at D = 128 the
// static walk had left SMs at 72% busy in the backward and 86% in the
// forward at their least (docs/perf.md, "Session 36").
//
// The counter resets itself: each CTA counts itself out once its last claim
// has returned, and the last CTA out zeroes both counters, so the next kernel
// on the stream (a CUDA graph replay included) starts from zero with no host
// work. The schedule kernel zeroes them whenever it writes a header. So two
// kernels must not run at the same time over one workspace (they would also
// share its tables).
#pragma once

#include <climits>

#include <cuda/atomic>

#include "schedule/block_schedule.h"

namespace blockattn::schedule {

// One claim: the next index past the `first` a kernel takes statically (the
// sm90 frame passes 0 and maps the claim to a chunk itself, cta_walk.h). A
// counter that was not zero at the launch (a workspace overwritten by
// something else between the schedule kernel and this one) may repeat or
// skip tiles, but never names one outside [0, num_tiles): a negative or
// overflowing claim is INT_MAX, which ends the walk.
__device__ __forceinline__ int claim_tile(TileClaims* claims, int first) {
  cuda::atomic_ref<int32_t, cuda::thread_scope_device> next(claims->next);
  const int claimed = next.fetch_add(1, cuda::std::memory_order_relaxed);
  return claimed >= 0 && claimed < INT_MAX - first ? first + claimed : INT_MAX;
}

// Counts a CTA out once its last claim has returned (every CTA of the grid,
// those that had no tile too, by one thread each): the last one out zeroes
// the counters for the next kernel. acq_rel: every CTA's claims come before
// its count, and the last one sees them all before it resets.
__device__ __forceinline__ void count_out(TileClaims* claims) {
  cuda::atomic_ref<int32_t, cuda::thread_scope_device> finished(claims->finished);
  if (finished.fetch_add(1, cuda::std::memory_order_acq_rel) == static_cast<int>(gridDim.x) - 1) {
    cuda::atomic_ref<int32_t, cuda::thread_scope_device>(claims->next).store(0, cuda::std::memory_order_relaxed);
    finished.store(0, cuda::std::memory_order_relaxed);
  }
}

template <int kAhead>
class ClaimedWalk {
 public:
  // A ring of claimed tile indices in shared memory: a power of two slots
  // (the modulo is a mask), more than kAhead, so that the slot a claim lands
  // in is no longer read (claim_store).
  static constexpr int kRing = 8;
  static_assert(kAhead >= 1 && kAhead < kRing, "claims land in slots no one reads any more");

  __device__ ClaimedWalk(TileClaims* claims, int* ring) : claims_(claims), ring_(ring) {}

  // The tile of this CTA's iteration n: readable once the claim for n was
  // stored (claim_store at iteration n - kAhead) and a barrier passed.
  __device__ int tile(int n) const {
    const int grid = static_cast<int>(gridDim.x);
    return n < kAhead ? static_cast<int>(blockIdx.x) + n * grid : ring_[n % kRing];
  }

  // Thread 0, at iteration i: claims the tile of iteration i + kAhead.
  // Issued early and stored late (claim_store, after the tile's work), so
  // that no warp waits on the atomic's round trip to L2.
  __device__ int claim_issue() const { return claim_tile(claims_, kAhead * static_cast<int>(gridDim.x)); }
  // Thread 0, after iteration i's first barrier and before the one that
  // ends it: the slot of iteration i + kAhead held iteration
  // i + kAhead - kRing's tile, which every thread last read in iteration
  // i - 1 at the latest (kRing > kAhead).
  __device__ void claim_store(int i, int claimed) const { ring_[(i + kAhead) % kRing] = claimed; }

  // Thread 0 of every CTA, once, after its last claim returned.
  __device__ void finish() const { count_out(claims_); }

 private:
  TileClaims* claims_;
  int* ring_;
};

}  // namespace blockattn::schedule
