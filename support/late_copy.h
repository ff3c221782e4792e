// A kernel that copies device buffers only after spinning for a while. Placed
// just before a library call on a stream, it checks that the call's kernels,
// which may start while the kernel before them still runs (programmatic
// dependent launch), wait for it before they read its writes.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

namespace blockattn::testing {

struct LateCopy {
  const void* from;
  void* to;
  size_t bytes;
};

// Enqueues one kernel on `stream` that spins for at least `delay_us`
// microseconds, then performs every copy (at most kMaxLateCopies).
inline constexpr int kMaxLateCopies = 8;
cudaError_t enqueue_late_copies(const std::vector<LateCopy>& copies, int delay_us, cudaStream_t stream);

}  // namespace blockattn::testing
