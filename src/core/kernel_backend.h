// What a backend (an implementation for one GPU architecture family) offers
// the API layer. The API validates, builds the schedule and asks the backends
// in order (backends/registry.h); it knows nothing about any of them beyond
// this interface.
#pragma once

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"
#include "core/problem.h"
#include "schedule/block_schedule.h"

namespace blockattn::core {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;

  virtual Backend id() const = 0;

  // Ok when this backend can run the (validated) problem on the current device:
  // the device's architecture, a kernel for the combination in the table,
  // whatever layout rules its data movement needs. Otherwise kUnsupported with
  // the reason, or kCudaError when the device could not be queried. Cheap and
  // side-effect free: it launches nothing.
  virtual Status supports(const Problem& p) const = 0;

  // Which of the schedule's tables launch() reads for the problem: the tiles,
  // where runs of short sequences share a tile (schedule/block_schedule.h),
  // or the blocks as they are.
  virtual bool reads_packed_tiles(const Problem& p) const = 0;

  // Enqueues the kernel for a problem supports() accepted, reading the
  // schedule that was enqueued before it on the same stream.
  virtual Status launch(const Problem& p, const schedule::Schedule& s, cudaStream_t stream) const = 0;
};

}  // namespace blockattn::core
