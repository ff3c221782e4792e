#include "core/kernel_table.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>

#include "core/batch_kind.h"
#include "schedule/block_schedule.h"

namespace blockattn::core {
namespace {

#define BLOCKATTN_KERNEL_BACKEND_sm80 Backend::kPortable
#define BLOCKATTN_KERNEL_BACKEND_sm90 Backend::kHopper
// The public row: KernelConfig::automatic says only whether kAuto may ever
// take it (kAutoUse below has when).
constexpr KernelConfig public_row(Backend backend, Operation op, DType dtype, int head_dim, int block_size, AutoUse use,
                                  Fusion fusion) {
  return {backend, op, dtype, head_dim, block_size, use != AutoUse::kNever, fusion == Fusion::kRotary};
}
#define BLOCKATTN_KERNEL(arch, Op, DT, Type, D, B, Auto, Fuse) \
  public_row(BLOCKATTN_KERNEL_BACKEND_##arch, Operation::k##Op, DType::k##DT, D, B, AutoUse::Auto, Fusion::k##Fuse),
constexpr KernelConfig kRows[] = {
#include "blockattn_kernel_table.inc"
};
#undef BLOCKATTN_KERNEL

// When kAuto may take each row of kRows.
#define BLOCKATTN_KERNEL(arch, Op, DT, Type, D, B, Auto, Fuse) AutoUse::Auto,
constexpr AutoUse kAutoUse[] = {
#include "blockattn_kernel_table.inc"
};
#undef BLOCKATTN_KERNEL
static_assert(std::size(kAutoUse) == std::size(kRows));

template <typename Field>
std::string joined_values(Field field) {
  std::set<int> values;
  for (const KernelConfig& c : kRows)
    values.insert(field(c));
  std::string s;
  for (int v : values)
    s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

}  // namespace

KernelTable kernel_table() { return {kRows, std::size(kRows)}; }

bool rotary_rows_stageable(const Rotary& r) {
  const int half = r.rotary_dim / 2;
  return r.table_type != TableType::kFloat32 && half > 0 && half % 8 == 0 && r.cos_row_stride > 0 &&
         r.sin_row_stride > 0 && rows_16_byte_aligned(r.cos, r.cos_row_stride, r.table_type) &&
         rows_16_byte_aligned(r.sin, r.sin_row_stride, r.table_type) && r.num_positions > 0 &&
         r.num_positions <= INT32_MAX;
}

// Whether a row is the problem's combination, on whichever backend.
static bool row_matches(const KernelConfig& c, const Problem& p) {
  return c.operation == p.operation && c.dtype == p.shape.dtype && c.head_dim == p.shape.head_dim &&
         c.block_size == p.shape.block_size && c.rotary == (p.fusion() == Fusion::kRotary);
}

const KernelConfig* find_kernel(Backend backend, const Problem& p) {
  for (const KernelConfig& c : kRows)
    if (c.backend == backend && row_matches(c, p)) return &c;
  return nullptr;
}

bool automatic_for(const KernelConfig& row, const Problem& p, const DeviceTraits& device) {
  switch (kAutoUse[&row - kRows]) {
    case AutoUse::kAlways:
      return true;
    case AutoUse::kShortBatches:
      return batch_kind(p) == BatchKind::kShort;
    case AutoUse::kShortBatchesOrFastMemory:
      return batch_kind(p) == BatchKind::kShort || device.memory_peak_gbps >= kFastMemoryGBps;
    case AutoUse::kExceptLongMhaOnSlowMemory:
      return batch_kind(p, device) != BatchKind::kLong || grouped_backward(p) ||
             device.memory_peak_gbps >= kFastMemoryGBps;
    case AutoUse::kSixteenBitTables:
      return rotary_rows_stageable(p.rotary);
    default:
      return false;
  }
}

bool any_backend_has_kernel(const Problem& p) {
  return std::any_of(std::begin(kRows), std::end(kRows), [&](const KernelConfig& c) { return row_matches(c, p); });
}

Status no_kernel(const char* who, const Problem& p) {
  return unsupported(who, " has no ", operation_name(p.operation), " kernel for ", dtype_name(p.shape.dtype),
                     ", head_dim ", p.shape.head_dim, ", block_size ", p.shape.block_size,
                     p.fusion() == Fusion::kRotary ? " with rotary" : "",
                     " (supported_configs() lists what this build has; the CMake options BLOCKATTN_HEAD_DIMS, "
                     "BLOCKATTN_BLOCK_SIZES and BLOCKATTN_MANUAL_KERNELS choose what is built)");
}

bool any_kernel_has_head_dim(int head_dim) {
  return std::any_of(std::begin(kRows), std::end(kRows), [&](const KernelConfig& c) { return c.head_dim == head_dim; });
}

bool any_kernel_has_block_size(int block_size) {
  return std::any_of(std::begin(kRows), std::end(kRows),
                     [&](const KernelConfig& c) { return c.block_size == block_size; });
}

std::string built_head_dims() {
  return joined_values([](const KernelConfig& c) { return c.head_dim; });
}
std::string built_block_sizes() {
  return joined_values([](const KernelConfig& c) { return c.block_size; });
}

bool splits_short_blocks(const Problem& p) {
  if (p.shape.block_size <= schedule::kShortBlockRows) return false;
  Problem short_part = p;
  short_part.shape.block_size = schedule::kShortBlockRows;
  for (const Operation op : {Operation::kForward, Operation::kBackward}) {
    short_part.operation = op;
    if (!any_backend_has_kernel(short_part)) return false;
  }
  return true;
}

int smallest_block_size() {
  int smallest = kDefaultBlockSize;
  for (const KernelConfig& c : kRows)
    smallest = std::min(smallest, c.block_size);
  return smallest;
}

}  // namespace blockattn::core
