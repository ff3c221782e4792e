#include "sm90/backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/kernel_entry.h"
#include "core/device_info.h"
#include "core/kernel_table.h"
#include "sm90/params.h"
#include "sm90/tensor_map.h"

namespace blockattn::sm90 {
namespace {

using core::Problem;
using core::TensorId;

#define BLOCKATTN_KERNEL(arch, ...) BLOCKATTN_KERNEL_##arch(__VA_ARGS__)
#define BLOCKATTN_KERNEL_sm80 BLOCKATTN_KERNEL_SKIP
#define BLOCKATTN_KERNEL_sm90 BLOCKATTN_KERNEL_ENTRY
const KernelEntry<Params> kKernels[] = {
#include "blockattn_kernel_table.inc"
    {},  // terminator
};
#undef BLOCKATTN_KERNEL

// A tensor this backend reaches through a TMA map, and the map's place in Params.
struct MappedTensor {
  TensorId id;
  CUtensorMap Params::*map;
};
constexpr MappedTensor kForwardInputs[] = {
    {TensorId::kQ, &Params::q_map}, {TensorId::kK, &Params::k_map}, {TensorId::kV, &Params::v_map}};
// The forward's pair maps of the same tensors, where it takes two heads a
// slot (forward_heads_per_slot).
constexpr MappedTensor kForwardPairInputs[] = {
    {TensorId::kQ, &Params::q_pair_map}, {TensorId::kK, &Params::k_pair_map}, {TensorId::kV, &Params::v_pair_map}};
constexpr MappedTensor kBackwardInputs[] = {{TensorId::kQ, &Params::q_map},
                                            {TensorId::kK, &Params::k_map},
                                            {TensorId::kV, &Params::v_map},
                                            {TensorId::kDout, &Params::dout_map}};

// The outputs a backward stores through TMA, where its kernel's config says
// kStoresByTma.
constexpr MappedTensor kBackwardOutputs[] = {
    {TensorId::kDq, &Params::dq_map}, {TensorId::kDk, &Params::dk_map}, {TensorId::kDv, &Params::dv_map}};

// The heads of a [T, H, D] tensor of the problem.
int heads_of(const Problem& p, TensorId id) {
  const bool kv = id == TensorId::kK || id == TensorId::kV || id == TensorId::kDk || id == TensorId::kDv;
  return kv ? p.shape.num_kv_heads : p.shape.num_q_heads;
}

// visit(tensor, heads, box rows) for every tensor the problem's kernel (the
// variant of `kernel` that runs it) reaches through a TMA map: its inputs
// (box: `input_box_rows`, Params::input_box_rows) and, where it stores by
// TMA, its outputs (box: a warp's rows).
template <typename Visit>
void for_each_mapped_tensor(const Problem& p, const KernelEntry<Params>& kernel, int input_box_rows, Visit&& visit) {
  const auto block_rows = static_cast<uint32_t>(input_box_rows);
  if (p.operation == Operation::kForward) {
    for (const MappedTensor& in : kForwardInputs)
      visit(in, heads_of(p, in.id), block_rows);
    return;
  }
  for (const MappedTensor& in : kBackwardInputs)
    visit(in, heads_of(p, in.id), block_rows);
  if (kernel.stores_by_tma(kernel_variant(p)))
    for (const MappedTensor& out : kBackwardOutputs)
      visit(out, heads_of(p, out.id), kStoreBoxRows);
}

// Encodes the rotary tables' row maps where the kernel stages its angles
// (forward_stages_angles, backward_stages_angles; `packed`: the forward
// reads the packed tiles) and the tables allow it (core::rotary_rows_stageable:
// 16-bit values whose rows TMA can address, the condition kAuto's
// `16-bit-tables` rule reads too). Elsewhere, or if the driver refuses a
// map, the kernel reads the tables itself: not an error.
bool encode_staged_angle_maps(const Problem& p, bool packed, Params& params) {
  const RotaryParams& r = params.attn.rotary;
  const bool stages = p.operation == Operation::kForward
                          ? forward_stages_angles(p.shape.head_dim, p.shape.block_size, p.fusion(), packed)
                          : backward_stages_angles(p.shape.head_dim, p.fusion(), batch_kind(p) == BatchKind::kShort);
  if (!stages || !core::rotary_rows_stageable(p.rotary)) return false;
  const DType dtype = r.table_type == TableType::kBF16 ? DType::kBF16 : DType::kFP16;
  const auto box_rows = static_cast<uint32_t>(p.shape.block_size);
  const char* error = nullptr;
  return encode_table_rows_map(&params.cos_map, r.cos, dtype, r.num_positions, r.half, r.cos_row_stride, box_rows,
                               &error) &&
         encode_table_rows_map(&params.sin_map, r.sin, dtype, r.num_positions, r.half, r.sin_row_stride, box_rows,
                               &error);
}

class Sm90Backend final : public core::KernelBackend {
 public:
  Backend id() const override { return Backend::kHopper; }

  Status supports(const Problem& p) const override {
    BLOCKATTN_RETURN_IF_ERROR(core::require_exact_compute_capability(90, "backend kHopper"));
    const KernelEntry<Params>* kernel = find_entry(kKernels, p);
    if (kernel == nullptr) return core::no_kernel("backend kHopper", p);
    if (grouped_backward(p) &&
        !grouped_backward_kernel(p.shape.head_dim, p.shape.block_size, p.fusion() == core::Fusion::kRotary))
      return core::unsupported(
          "backend kHopper's backward supports num_q_heads != num_kv_heads at head_dim 64 and 128 with block_size 64 "
          "and no rotary only (other grouped-query backwards run on kPortable)");
    const char* why = nullptr;
    // (The layout check does not depend on the boxes' rows.)
    for_each_mapped_tensor(p, *kernel, p.shape.block_size, [&](const MappedTensor& t, int heads, uint32_t) {
      if (why == nullptr) why = tma_layout_problem(p.tensor(t.id), heads);
    });
    if (why != nullptr) return core::unsupported("backend kHopper cannot address this layout: ", why);
    return Status::Ok();
  }

  // The backward packs short sequences, and so does the forward's kernel for
  // batches of them where it measured faster (sm90/params.h).
  bool reads_packed_tiles(const Problem& p) const override {
    return p.operation == Operation::kBackward ||
           (batch_kind(p) == BatchKind::kShort && forward_packs_short_sequences(p.shape.head_dim, p.shape.block_size));
  }

  Status launch(const Problem& p, const schedule::Schedule& s, cudaStream_t stream) const override {
    const KernelEntry<Params>* kernel = find_entry(kKernels, p);
    // The tensor maps are encoded by a driver entry point, which needs the
    // device's context current in this thread. A runtime call makes it so;
    // without one, a thread whose first call into this library lands here
    // (e.g. a backward reusing the forward's schedule, in PyTorch's autograd
    // thread) would have none.
    BLOCKATTN_RETURN_IF_ERROR(core::make_device_current());
    const core::DeviceTraits device{core::memory_peak_gbps()};
    Params params{};
    params.input_box_rows = backward_input_box_rows(p, device);
    const char* error = nullptr;
    for_each_mapped_tensor(p, *kernel, params.input_box_rows, [&](const MappedTensor& t, int heads, uint32_t box_rows) {
      if (error == nullptr)
        encode_head_tile_map(&(params.*t.map), p.tensor(t.id), p.shape.dtype, p.shape.total_tokens, heads,
                             p.shape.head_dim, tile_chunk_cols(p.operation, p.shape.head_dim), box_rows, &error);
    });
    if (p.operation == Operation::kForward &&
        forward_heads_per_slot(p.shape.head_dim, p.shape.block_size, p.fusion(), kernel_variant(p).batch) == 2) {
      for (const MappedTensor& t : kForwardPairInputs)
        if (error == nullptr)
          encode_head_pair_map(&(params.*t.map), p.tensor(t.id), p.shape.dtype, p.shape.total_tokens, heads_of(p, t.id),
                               p.shape.head_dim, static_cast<uint32_t>(p.shape.block_size), &error);
    }
    if (error != nullptr) return core::unsupported("backend kHopper: ", error);
    params.out = p.tensor(TensorId::kOut);
    params.dq = p.tensor(TensorId::kDq);
    params.dk = p.tensor(TensorId::kDk);
    params.dv = p.tensor(TensorId::kDv);
    params.attn = attention_params(p, s);
    params.stepped_stores = backward_stores_stepped(p, device);
    params.staged_angles = encode_staged_angle_maps(p, reads_packed_tiles(p), params);
    KernelVariant variant = kernel_variant(p);
    // Tiles are (block, query head), but for the grouped kernels' units (block, KV head).
    const bool grouped = variant.grouped_heads && has_grouped_kernel(p);
    const int64_t max_tiles = schedule::max_blocks(p.shape.num_seqs, p.shape.total_tokens, p.shape.block_size) *
                              (grouped ? p.shape.num_kv_heads : p.shape.num_q_heads);
    variant.staged_tables = params.staged_angles;  // the row's StagedTables kernel, where it has one
    return launch_persistent(*kernel, variant, params, max_tiles, stream, "launching the kHopper kernel");
  }
};

}  // namespace

const core::KernelBackend& backend() {
  static const Sm90Backend instance;
  return instance;
}

}  // namespace blockattn::sm90
