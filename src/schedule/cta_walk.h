// The walks of the persistent sm_90 kernels over a table of tiles: which
// tiles CTA `cta` of `ctas` takes, and in which order, statically or with
// claims made at run time. Host-callable, so that the CPU tests can check
// that every walk covers the table exactly once (tests/cpu/cta_walk_test.cpp,
// claims interleaved at random); the frames (sm90/frame.cuh,
// sm90/tensor_ring.cuh) call them with blockIdx.x and gridDim.x.
#pragma once

#include <climits>
#include <cstdint>

#include "schedule/block_schedule.h"

namespace blockattn::schedule {

// A CTA's i-th tile when it takes `together` neighbouring tiles at a time
// (neighbouring heads of one block, loaded together: docs/perf.md,
// "Neighbouring tiles together in the sm_90 frame"). With together = 1 it
// is cta + i * ctas. Increasing in i, so a walk ends at its first tile past
// the table.
BA_HOST_DEVICE int cta_tile(int together, int cta, int ctas, int i) {
  return together * (cta + i / together * ctas) + i % together;
}

// cta_tile(together, cta, ctas, i + 1) - cta_tile(together, cta, ctas, i).
BA_HOST_DEVICE int cta_tile_step(int together, int ctas, int i) {
  return i % together == together - 1 ? together * ctas - (together - 1) : 1;
}

// The walk of a CTA that claims most of its tiles at run time (the sm90
// frame's producer; schedule/tile_claims.cuh has the counter): positions
// 0 .. kStatic - 1 of the static walk above, whose loads go out without
// waiting for a claim, then chunks of kStatic consecutive tiles, claim
// `unit` being the chunk that starts at kStatic * ctas + unit * kStatic.
// Every tile is taken once, whichever CTA makes which claim, and a CTA's
// tiles increase, so its walk ends at its first tile past the table.
//
// A chunk's claim is made as the chunk before it starts: the atomic's round
// trip (microseconds under a saturated memory system) then hides behind a
// chunk of loads. Claiming kTogether tiles at a time, one group ahead, the
// producer waited on it: the D = 64 forward lost 7 points at headline-d64
// and 25 at tail-d64 (docs/perf.md, "Session 36").
template <int kTogether, int kStatic>
class ChunkClaimingWalk {
  static_assert(kStatic % kTogether == 0, "whole groups of neighbours, statically and per chunk");

 public:
  // claim(): the next unit of the grid's counter; anything negative or
  // INT_MAX (a counter that something else wrote) names no tile.
  template <typename Claim>
  BA_HOST_DEVICE ChunkClaimingWalk(int cta, int ctas, Claim&& claim) : cta_(cta), ctas_(ctas), pending_(claim()) {}

  // The walk's next tile; num_tiles or more once it is over, and on every
  // call after that.
  template <typename Claim>
  BA_HOST_DEVICE int next(int num_tiles, Claim&& claim) {
    const int i = position_++;
    if (i < kStatic) return cta_tile(kTogether, cta_, ctas_, i);
    if ((i - kStatic) % kStatic == 0) {
      tile_ = chunk_start(pending_);
      if (tile_ < num_tiles) pending_ = claim();
    } else if (tile_ < INT_MAX) {
      ++tile_;
    }
    return tile_;
  }

 private:
  BA_HOST_DEVICE int chunk_start(int unit) const {
    const int64_t start = static_cast<int64_t>(kStatic) * ctas_ + static_cast<int64_t>(unit) * kStatic;
    return unit >= 0 && start < INT_MAX ? static_cast<int>(start) : INT_MAX;
  }

  int cta_, ctas_;
  int pending_;  // the next chunk's claim
  int tile_ = INT_MAX, position_ = 0;
};

}  // namespace blockattn::schedule
