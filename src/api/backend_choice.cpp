#include "api/backend_choice.h"

#include <cstdlib>
#include <string>

#include "backends/registry.h"
#include "core/kernel_table.h"
#include "core/status.h"

namespace blockattn::api {
namespace {

bool portable_forced_by_environment() {
  const char* v = std::getenv("BLOCKATTN_FORCE_PORTABLE");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

bool chosen_automatically(const core::KernelBackend& b, const core::Problem& p) {
  const KernelConfig* row = core::find_kernel(b.id(), p);
  return row != nullptr && row->automatic;
}

}  // namespace

// kAuto: the first backend that supports the call and whose table row allows
// automatic use. A named backend: that one, or its reason for refusing.
Status choose_backend(const core::Problem& p, const core::KernelBackend** chosen) {
  Backend wanted = p.backend;
  if (wanted == Backend::kAuto && portable_forced_by_environment()) wanted = Backend::kPortable;
  std::string reasons;
  for (const core::KernelBackend* b : backends::in_preference_order()) {
    if (wanted != Backend::kAuto && b->id() != wanted) continue;
    const Status s = b->supports(p);
    if (s.ok() && (wanted != Backend::kAuto || chosen_automatically(*b, p))) {
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
