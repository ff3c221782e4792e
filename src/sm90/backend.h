// The sm90 backend ("hopper"): TMA + wgmma kernels, warp-specialized and
// persistent, for compute capability 9.0 (sm_90a).
#pragma once

#include "core/dense_problem.h"
#include "core/kernel_backend.h"

namespace blockattn::sm90 {

const core::KernelBackend& backend();
const core::DenseKernelBackend& dense_backend();

}  // namespace blockattn::sm90
