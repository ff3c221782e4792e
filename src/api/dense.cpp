// The dense forward's public entry points: validate, choose a backend, let it
// launch. Nothing here synchronizes, reads device memory or knows any
// architecture.
#include "blockattn/dense.h"

#include "api/backend_choice.h"
#include "api/validate_dense.h"
#include "core/dense_problem.h"
#include "core/status.h"

namespace blockattn {

const DenseKernelConfig* dense_configs(size_t* count) {
  const core::DenseKernelTable table = core::dense_kernel_table();
  *count = table.size;
  return table.rows;
}

Status dense_forward(const DenseForwardArgs& args, cudaStream_t stream) {
  const core::DenseProblem p(args);
  BLOCKATTN_RETURN_IF_ERROR(api::validate_dense_problem(p));
  // A named backend is asked even when there is nothing to compute, so that a
  // request it cannot serve is refused whatever the shape.
  if (p.empty() && p.backend == Backend::kAuto) return Status::Ok();
  const core::DenseKernelBackend* backend = nullptr;
  BLOCKATTN_RETURN_IF_ERROR(api::choose_dense_backend(p, &backend));
  if (p.empty()) return Status::Ok();
  return backend->launch(p, stream);
}

Status dense_forward_backend(const DenseForwardArgs& args, Backend* chosen) {
  const core::DenseProblem p(args);
  BLOCKATTN_RETURN_IF_ERROR(api::validate_dense_problem(p));
  const core::DenseKernelBackend* backend = nullptr;
  BLOCKATTN_RETURN_IF_ERROR(api::choose_dense_backend(p, &backend));
  *chosen = backend->id();
  return Status::Ok();
}

}  // namespace blockattn
