// The sm80 backend ("portable"): mma.sync kernels that run on every GPU of
// compute capability 8.0 or newer.
#pragma once

#include "core/dense_problem.h"
#include "core/kernel_backend.h"

namespace blockattn::sm80 {

const core::KernelBackend& backend();
const core::DenseKernelBackend& dense_backend();

}  // namespace blockattn::sm80
