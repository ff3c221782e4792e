#include "api/backend_choice.h"

#include <cstdlib>

#include "backends/registry.h"
#include "core/device_info.h"
#include "core/kernel_table.h"

namespace blockattn::api {

bool portable_forced_by_environment() {
  const char* v = std::getenv("BLOCKATTN_FORCE_PORTABLE");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

Status choose_backend(const core::Problem& p, const core::KernelBackend** chosen) {
  const core::DeviceTraits device{core::memory_peak_gbps()};
  return choose_from(
      backends::in_preference_order(), p, p.backend,
      [&](const core::KernelBackend& b) {
        const KernelConfig* row = core::find_kernel(b.id(), p);
        return row != nullptr && core::automatic_for(*row, p, device);
      },
      chosen);
}

Status choose_dense_backend(const core::DenseProblem& p, const core::DenseKernelBackend** chosen) {
  return choose_from(
      backends::dense_in_preference_order(), p, p.backend,
      [&](const core::DenseKernelBackend& b) {
        const DenseKernelConfig* row = core::find_dense_kernel(b.id(), p);
        return row != nullptr && row->automatic;
      },
      chosen);
}

}  // namespace blockattn::api
