#include "sm80/backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/kernel_entry.h"
#include "core/device_info.h"
#include "core/kernel_table.h"
#include "sm80/params.h"

namespace blockattn::sm80 {
namespace {

using core::Problem;
using core::TensorId;

#define BLOCKATTN_KERNEL(arch, ...) BLOCKATTN_KERNEL_##arch(__VA_ARGS__)
#define BLOCKATTN_KERNEL_sm80 BLOCKATTN_KERNEL_ENTRY
#define BLOCKATTN_KERNEL_sm90 BLOCKATTN_KERNEL_SKIP
const KernelEntry<Params> kKernels[] = {
#include "blockattn_kernel_table.inc"
    {},  // terminator
};
#undef BLOCKATTN_KERNEL

class Sm80Backend final : public core::KernelBackend {
 public:
  Backend id() const override { return Backend::kPortable; }

  Status supports(const Problem& p) const override {
    BLOCKATTN_RETURN_IF_ERROR(core::require_compute_capability(80, "backend kPortable"));
    if (find_entry(kKernels, p) == nullptr) return core::no_kernel("backend kPortable", p);
    return Status::Ok();
  }

  // The backward packs short sequences; the forward measured faster on the
  // blocks as they are (docs/perf.md, "Packed short sequences").
  bool reads_packed_tiles(const Problem& p) const override { return p.operation == Operation::kBackward; }

  Status launch(const Problem& p, const schedule::Schedule& s, cudaStream_t stream) const override {
    const KernelEntry<Params>* kernel = find_entry(kKernels, p);
    Params params{};
    params.q = p.tensor(TensorId::kQ);
    params.k = p.tensor(TensorId::kK);
    params.v = p.tensor(TensorId::kV);
    params.out = p.tensor(TensorId::kOut);
    params.dout = p.tensor(TensorId::kDout);
    params.dq = p.tensor(TensorId::kDq);
    params.dk = p.tensor(TensorId::kDk);
    params.dv = p.tensor(TensorId::kDv);
    params.attn = attention_params(p, s);
    // Forward tiles are (block, query head); backward tiles (block, KV head),
    // each summing its group's query heads.
    const int heads_per_block = p.operation == Operation::kForward ? p.shape.num_q_heads : p.shape.num_kv_heads;
    const int64_t max_tiles =
        schedule::max_blocks(p.shape.num_seqs, p.shape.total_tokens, p.shape.block_size) * heads_per_block;
    return launch_persistent(*kernel, p, params, max_tiles, stream, "launching the kPortable kernel");
  }
};

}  // namespace

const core::KernelBackend& backend() {
  static const Sm80Backend instance;
  return instance;
}

}  // namespace blockattn::sm80
