// The sm80 backend's dense forward: the kernels of the dense table's sm80 rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/dense_kernel_entry.h"
#include "core/device_info.h"
#include "sm80/backend.h"
#include "sm80/params.h"

namespace blockattn::sm80 {
namespace {

using Params = DenseParams;
#define BLOCKATTN_DENSE_KERNEL(arch, ...) BLOCKATTN_DENSE_KERNEL_##arch(__VA_ARGS__)
#define BLOCKATTN_DENSE_KERNEL_sm80 BLOCKATTN_DENSE_KERNEL_ENTRY
#define BLOCKATTN_DENSE_KERNEL_sm90 BLOCKATTN_DENSE_KERNEL_SKIP
const DenseKernelEntry<Params> kKernels[] = {
#include "blockattn_dense_kernel_table.inc"
    {},  // terminator
};
#undef BLOCKATTN_DENSE_KERNEL

class Sm80DenseBackend final : public core::DenseKernelBackend {
 public:
  Backend id() const override { return Backend::kPortable; }

  Status supports(const core::DenseProblem& p) const override {
    BLOCKATTN_RETURN_IF_ERROR(core::require_compute_capability(80, "backend kPortable"));
    if (find_dense_entry(kKernels, p) == nullptr) return no_dense_kernel("kPortable", p);
    return Status::Ok();
  }

  Status launch(const core::DenseProblem& p, cudaStream_t stream) const override {
    const Params params{p.q, p.k, p.v, p.out, dense_attn_params(p, kDenseRowsPerUnit)};
    return launch_dense(*find_dense_entry(kKernels, p), params, p.causal, params.attn.num_items, stream,
                        "launching the kPortable dense forward kernel");
  }
};

}  // namespace

const core::DenseKernelBackend& dense_backend() {
  static const Sm80DenseBackend instance;
  return instance;
}

}  // namespace blockattn::sm80
