// Picking the backend for a validated problem: Options::backend, the
// BLOCKATTN_FORCE_PORTABLE override, and each backend's own answer.
#pragma once

#include "core/kernel_backend.h"

namespace blockattn::api {

Status choose_backend(const core::Problem& p, const core::KernelBackend** chosen);

}  // namespace blockattn::api
