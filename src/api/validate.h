// Host-side validation of everything checkable without touching device memory.
// Each failure names the argument and the expected value; on failure the entry
// points launch nothing.
#pragma once

#include <cstddef>

#include "core/problem.h"

namespace blockattn::api {

// Everything but the workspace.
Status validate_problem(const core::Problem& p);
Status validate_workspace(const core::Problem& p, const void* workspace, size_t workspace_bytes);

}  // namespace blockattn::api
