// The backends this library has, in the order Backend::kAuto tries them. The
// only place that names the architecture folders above core/.
#pragma once

#include <cstddef>

#include "core/dense_problem.h"
#include "core/kernel_backend.h"

namespace blockattn::backends {

struct BackendList {
  const core::KernelBackend* const* begin_;
  const core::KernelBackend* const* end_;
  const core::KernelBackend* const* begin() const { return begin_; }
  const core::KernelBackend* const* end() const { return end_; }
};

BackendList in_preference_order();

struct DenseBackendList {
  const core::DenseKernelBackend* const* begin_;
  const core::DenseKernelBackend* const* end_;
  const core::DenseKernelBackend* const* begin() const { return begin_; }
  const core::DenseKernelBackend* const* end() const { return end_; }
};

// The dense forward's backends, in the same order.
DenseBackendList dense_in_preference_order();

}  // namespace blockattn::backends
