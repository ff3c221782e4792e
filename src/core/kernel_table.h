// The kernel table: which (backend, operation, dtype, head dim, block size,
// fusion) combinations this build contains. It is generated at configure time from
// src/kernel_table.cmake (the one place a combination is added), filtered by
// the BLOCKATTN_HEAD_DIMS / BLOCKATTN_BLOCK_SIZES / BLOCKATTN_MANUAL_KERNELS options, into
// blockattn_kernel_table.inc: one line
//   BLOCKATTN_KERNEL(arch, Op, DT, Type, head_dim, block_size, AutoUse, Fusion)
// per compiled kernel. This header turns it into data for validation, backend
// choice and supported_configs(); each backend expands the same file into its
// launch table (sm80/backend.cpp, sm90/backend.cpp).
#pragma once

#include <cstddef>
#include <string>

#include "blockattn/blockattn.h"
#include "core/batch_kind.h"
#include "core/problem.h"
#include "core/status.h"

namespace blockattn::core {

struct KernelTable {
  const KernelConfig* rows;
  size_t size;

  const KernelConfig* begin() const { return rows; }
  const KernelConfig* end() const { return rows + size; }
};

KernelTable kernel_table();

// When kAuto may take a row (the table's `automatic` column): always, for
// batches of short sequences only (core/batch_kind.h), for those and for
// every batch on a device with fast memory, for every batch but long ones of
// ungrouped heads on a device with slower memory, where the rotary tables'
// rows can be staged by TMA (16-bit values, rotary_rows_stageable), or never.
enum class AutoUse {
  kAlways,
  kShortBatches,
  kShortBatchesOrFastMemory,
  kExceptLongMhaOnSlowMemory,
  kSixteenBitTables,
  kNever
};

// What kAuto's choice reads of the device: core::DeviceTraits
// (core/batch_kind.h).

// Whether the rotary tables' rows can be staged by TMA copies, as the sm_90
// kernels that stage their angles do (sm90/backend.cpp,
// encode_staged_angle_maps, which asks this first): 16-bit values, rows of
// whole 16-byte units (rotary_dim / 2 a multiple of 8), 16-byte aligned
// bases and row strides, and positions that a 32-bit TMA coordinate
// reaches. The `16-bit-tables` rule reads it: where the rows cannot be
// staged, that kernel reads them itself and is the slower one.
bool rotary_rows_stageable(const Rotary& r);

// The backend's row for the problem's combination (operation, dtype, head
// dim, block size, fusion), or null.
const KernelConfig* find_kernel(Backend backend, const Problem& p);

// Whether kAuto may take `row` (one of find_kernel's) for this problem on
// this device.
bool automatic_for(const KernelConfig& row, const Problem& p, const DeviceTraits& device);

// Whether any backend's row matches the problem's combination.
bool any_backend_has_kernel(const Problem& p);

// "<who> has no such kernel": the refusal, naming the combination
// (operation, dtype, head dim, block size, fusion); `who` is a backend
// ("backend kHopper") or the whole build ("this build").
Status no_kernel(const char* who, const Problem& p);

// Whether any backend has a kernel with this head dim / block size (for
// argument validation), and the built values as text for messages ("64, 128").
bool any_kernel_has_head_dim(int head_dim);
bool any_kernel_has_block_size(int block_size);
std::string built_head_dims();
std::string built_block_sizes();

// The smallest built block size: it bounds the schedule's block count.
int smallest_block_size();

// Whether the problem's schedule splits off its blocks of at most
// schedule::kShortBlockRows rows for that block size's kernels
// (schedule/block_schedule.h, "Short blocks"): for larger blocks, where the
// build has kernels of that size for both operations with the problem's
// dtype, head dim and fusion, so that a forward and a backward that reuses
// its schedule always agree.
bool splits_short_blocks(const Problem& p);

}  // namespace blockattn::core
