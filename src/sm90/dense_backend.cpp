// The sm90 backend's dense forward: the kernels of the dense table's sm90
// rows, reading q, k and v through rank-4 TMA maps.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/dense_kernel_entry.h"
#include "core/device_info.h"
#include "sm90/backend.h"
#include "sm90/params.h"
#include "sm90/tensor_map.h"

namespace blockattn::sm90 {
namespace {

using Params = DenseParams;
#define BLOCKATTN_DENSE_KERNEL(arch, ...) BLOCKATTN_DENSE_KERNEL_##arch(__VA_ARGS__)
#define BLOCKATTN_DENSE_KERNEL_sm80 BLOCKATTN_DENSE_KERNEL_SKIP
#define BLOCKATTN_DENSE_KERNEL_sm90 BLOCKATTN_DENSE_KERNEL_ENTRY
const DenseKernelEntry<Params> kKernels[] = {
#include "blockattn_dense_kernel_table.inc"
    {},  // terminator
};
#undef BLOCKATTN_DENSE_KERNEL

struct MappedInput {
  const char* name;
  DenseTensorView DenseForwardArgs::*view;
  CUtensorMap Params::*map;
  bool query_heads;
};
constexpr MappedInput kInputs[] = {{"q", &DenseForwardArgs::q, &Params::q_map, true},
                                   {"k", &DenseForwardArgs::k, &Params::k_map, false},
                                   {"v", &DenseForwardArgs::v, &Params::v_map, false}};

class Sm90DenseBackend final : public core::DenseKernelBackend {
 public:
  Backend id() const override { return Backend::kHopper; }

  Status supports(const core::DenseProblem& p) const override {
    BLOCKATTN_RETURN_IF_ERROR(core::require_exact_compute_capability(90, "backend kHopper"));
    if (find_dense_entry(kKernels, p) == nullptr) return no_dense_kernel("kHopper", p);
    for (const MappedInput& in : kInputs) {
      const int heads = in.query_heads ? p.shape.num_q_heads : p.shape.num_kv_heads;
      if (const char* why = dense_tma_layout_problem(p.*in.view, p.shape.batch, heads, p.shape.seq_len))
        return core::unsupported("backend kHopper cannot read ", in.name, ": ", why);
    }
    return Status::Ok();
  }

  Status launch(const core::DenseProblem& p, cudaStream_t stream) const override {
    BLOCKATTN_RETURN_IF_ERROR(core::make_device_current());  // the driver's encode needs a current context
    Params params{};
    for (const MappedInput& in : kInputs) {
      const char* error = nullptr;
      const int heads = in.query_heads ? p.shape.num_q_heads : p.shape.num_kv_heads;
      const uint32_t box_rows =
          in.query_heads ? dense_rows_per_unit(p.shape.head_dim) : dense_keys_per_tile(p.shape.head_dim);
      if (!encode_dense_tile_map(&(params.*in.map), p.*in.view, p.shape.dtype, p.shape.batch, heads, p.shape.seq_len,
                                 p.shape.head_dim, box_rows, &error))
        return core::unsupported("backend kHopper: ", in.name, ": ", error);
    }
    params.out = p.out;
    // Rows before row 0 are skipped a whole consumer warpgroup at a time:
    // its key tiles count none, and TMA fills its Q rows with zeros.
    const int rows = dense_rows_per_unit(p.shape.head_dim);
    params.attn = dense_attn_params(p, rows, rows / dense_consumers(p.shape.head_dim));
    return launch_dense(*find_dense_entry(kKernels, p), params, p.causal, params.attn.num_items, stream,
                        "launching the kHopper dense forward kernel");
  }
};

}  // namespace

const core::DenseKernelBackend& dense_backend() {
  static const Sm90DenseBackend instance;
  return instance;
}

}  // namespace blockattn::sm90
