// Host-side validation of a dense forward request: everything checkable
// without touching device memory, each failure naming the argument. On
// failure dense_forward() launches nothing.
#pragma once

#include "core/dense_problem.h"

namespace blockattn::api {

Status validate_dense_problem(const core::DenseProblem& p);

}  // namespace blockattn::api
