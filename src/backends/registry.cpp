#include "backends/registry.h"

#include <iterator>

#include "sm80/backend.h"
#include "sm90/backend.h"

namespace blockattn::backends {

BackendList in_preference_order() {
  // sm90 first: where it supports a call it is the faster path (docs/perf.md);
  // rows it does not win are marked manual in the kernel table.
  static const core::KernelBackend* const kOrder[] = {&sm90::backend(), &sm80::backend()};
  return {std::begin(kOrder), std::end(kOrder)};
}

DenseBackendList dense_in_preference_order() {
  static const core::DenseKernelBackend* const kOrder[] = {&sm90::dense_backend(), &sm80::dense_backend()};
  return {std::begin(kOrder), std::end(kOrder)};
}

}  // namespace blockattn::backends
