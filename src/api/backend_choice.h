// Picking the backend for a validated problem: the requested backend, the
// BLOCKATTN_FORCE_PORTABLE override, and each backend's own answer. One rule
// for block attention and the dense forward alike.
#pragma once

#include <string>

#include "core/dense_problem.h"
#include "core/kernel_backend.h"
#include "core/status.h"

namespace blockattn::api {

Status choose_backend(const core::Problem& p, const core::KernelBackend** chosen);
Status choose_dense_backend(const core::DenseProblem& p, const core::DenseKernelBackend** chosen);

// Whether BLOCKATTN_FORCE_PORTABLE turns kAuto into kPortable.
bool portable_forced_by_environment();

// kAuto: the first backend of `order` that supports the call and whose table
// row allows automatic use. A named backend: that one, or its reason for refusing.
template <typename BackendList, typename ProblemT, typename BackendT, typename IsAutomatic>
Status choose_from(const BackendList& order, const ProblemT& p, Backend requested, IsAutomatic automatic,
                   const BackendT** chosen) {
  Backend wanted = requested;
  if (wanted == Backend::kAuto && portable_forced_by_environment()) wanted = Backend::kPortable;
  std::string reasons;
  for (const BackendT* b : order) {
    if (wanted != Backend::kAuto && b->id() != wanted) continue;
    const Status s = b->supports(p);
    if (s.ok() && (wanted != Backend::kAuto || automatic(*b))) {
      *chosen = b;
      return s;
    }
    if (wanted != Backend::kAuto || s.code == StatusCode::kCudaError) return s;
    reasons += std::string(reasons.empty() ? "" : "; ") +
               (s.ok() ? std::string(backend_name(b->id())) + " is not chosen automatically for this call" : s.message);
  }
  if (wanted != Backend::kAuto)
    return core::unsupported("backend ", backend_name(wanted), " is not part of this library");
  return core::unsupported("no backend can run this call: ", reasons);
}

}  // namespace blockattn::api
