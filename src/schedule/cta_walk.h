// The walks of the persistent sm_90 kernels over a table of tiles: which
// tiles CTA `cta` of `ctas` takes, and in which order. Host-callable, so
// that the CPU tests can check that every walk covers the table exactly
// once (tests/cpu/cta_walk_test.cpp); the frames (sm90/frame.cuh) call it
// with blockIdx.x and gridDim.x.
#pragma once

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

}  // namespace blockattn::schedule
