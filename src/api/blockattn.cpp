// Public entry points: describe the request as a core::Problem, validate it,
// choose a backend, enqueue the block schedule and let the backend launch.
// Nothing here synchronizes, reads device memory or knows any architecture.
#include "blockattn/blockattn.h"

#include <algorithm>

#include "api/backend_choice.h"
#include "api/validate.h"
#include "core/device_info.h"
#include "core/kernel_table.h"
#include "core/status.h"
#include "schedule/block_schedule.h"

namespace blockattn {
namespace {

// Blocks the workspace has room for: enough for the smallest built block size.
size_t workspace_capacity(int64_t num_seqs, int64_t total_tokens) {
  return schedule::WorkspaceLayout::capacity(std::max<int64_t>(num_seqs, 0), std::max<int64_t>(total_tokens, 0),
                                             core::smallest_block_size());
}

// The short blocks of a split schedule (schedule/block_schedule.h, "Short
// blocks"): the same call at their block size, a batch of short sequences,
// on the backend the call named where that one can run it, else on kAuto's
// choice, reading the short table its kernel wants.
Status launch_short_blocks(const core::Problem& p, void* workspace, size_t capacity, cudaStream_t stream) {
  core::Problem short_part = p;
  short_part.shape.block_size = schedule::kShortBlockRows;
  short_part.short_blocks = true;
  const core::KernelBackend* backend = nullptr;
  if (!api::choose_backend(short_part, &backend).ok()) {
    short_part.backend = Backend::kAuto;
    BLOCKATTN_RETURN_IF_ERROR(api::choose_backend(short_part, &backend));
  }
  const schedule::ScheduleTable table = backend->reads_packed_tiles(short_part) ? schedule::ScheduleTable::kShortTiles
                                                                                : schedule::ScheduleTable::kShortBlocks;
  const Shape& s = p.shape;
  return backend->launch(short_part,
                         schedule::WorkspaceLayout::schedule(workspace, capacity, static_cast<int32_t>(s.num_seqs),
                                                             static_cast<int32_t>(s.total_tokens), s.block_size,
                                                             /*split=*/true, table),
                         stream);
}

Status run(const core::Problem& p, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  BLOCKATTN_RETURN_IF_ERROR(api::validate_problem(p));
  BLOCKATTN_RETURN_IF_ERROR(api::validate_workspace(p, workspace, workspace_bytes));
  // A named backend is asked even when there is nothing to compute, and kAuto
  // checks the table, so that a request the build cannot serve is refused
  // whatever the batch holds.
  if (p.empty() && p.backend == Backend::kAuto)
    return core::any_backend_has_kernel(p) ? Status::Ok() : core::no_kernel("this build", p);
  const core::KernelBackend* backend = nullptr;
  BLOCKATTN_RETURN_IF_ERROR(api::choose_backend(p, &backend));
  if (p.empty()) return Status::Ok();
  const Shape& s = p.shape;
  const auto num_seqs = static_cast<int32_t>(s.num_seqs), tokens = static_cast<int32_t>(s.total_tokens);
  const size_t capacity = workspace_capacity(s.num_seqs, s.total_tokens);
  const bool split = core::splits_short_blocks(p);
  if (!p.reuse_schedule)
    BLOCKATTN_RETURN_IF_ERROR(
        core::cuda_status(schedule::build_block_schedule(p.offsets, num_seqs, tokens, s.block_size, split, workspace,
                                                         capacity, stream, core::schedule_overlaps_prior_kernels()),
                          "launching the block-schedule kernel"));
  // The tiles with short sequences packed (one tile's fixed cost for several
  // of them) or the blocks as they are: the backend's kernel decides.
  const schedule::ScheduleTable table =
      backend->reads_packed_tiles(p) ? schedule::ScheduleTable::kTiles : schedule::ScheduleTable::kBlocks;
  BLOCKATTN_RETURN_IF_ERROR(backend->launch(
      p, schedule::WorkspaceLayout::schedule(workspace, capacity, num_seqs, tokens, s.block_size, split, table),
      stream));
  return split ? launch_short_blocks(p, workspace, capacity, stream) : Status::Ok();
}

Status chosen_backend(const core::Problem& p, Backend* chosen) {
  BLOCKATTN_RETURN_IF_ERROR(api::validate_problem(p));
  const core::KernelBackend* backend = nullptr;
  BLOCKATTN_RETURN_IF_ERROR(api::choose_backend(p, &backend));
  *chosen = backend->id();
  return Status::Ok();
}

}  // namespace

const KernelConfig* supported_configs(size_t* count) {
  const core::KernelTable table = core::kernel_table();
  *count = table.size;
  return table.rows;
}

size_t workspace_size(int64_t num_seqs, int64_t total_tokens) {
  return schedule::WorkspaceLayout::bytes(workspace_capacity(num_seqs, total_tokens), std::max<int64_t>(num_seqs, 0));
}

Status forward(const ForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return run(core::describe(a), workspace, workspace_bytes, stream);
}

Status backward(const BackwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return run(core::describe(a), workspace, workspace_bytes, stream);
}

Status forward_backend(const ForwardArgs& a, Backend* chosen) { return chosen_backend(core::describe(a), chosen); }

Status backward_backend(const BackwardArgs& a, Backend* chosen) { return chosen_backend(core::describe(a), chosen); }

const char* version() { return BLOCKATTN_VERSION_STRING; }

const char* dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "kAuto";
    case Backend::kPortable:
      return "kPortable";
    case Backend::kHopper:
      return "kHopper";
  }
  return "unknown";
}

const char* operation_name(Operation operation) { return operation == Operation::kForward ? "forward" : "backward"; }

}  // namespace blockattn
