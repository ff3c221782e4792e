// Moving a warp's 16 rows between accumulators, shared-memory tiles and global
// memory, for any tile layout (smem_layout.cuh). Outputs leave this way in
// every kernel: staged as 16-bit rows in a tile no one reads any more, then
// 16-byte stores that skip rows past the block's end, so nothing outside a
// block is ever written.
#pragma once

#include "tile/fragments.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::tile {

// Writes a warp's 16 x kN accumulator rows (rows row0.., columns col0..),
// scaled per row, rounded to T, into a tile.
template <typename Layout, typename T, int kN>
__device__ __forceinline__ void stage_rows(const Accumulator<kN>& acc, const RowScale& scale, T* tile, int row0,
                                           int col0, int lane) {
  const int r = row0 + lane / 4;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r, col)) =
        pack2<T>(acc.c[j][0] * scale.row[0], acc.c[j][1] * scale.row[0]);
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r + 8, col)) =
        pack2<T>(acc.c[j][2] * scale.row[1], acc.c[j][3] * scale.row[1]);
  }
}

// The same for an accumulator already packed into A-operand fragments
// (to_operand): the bits stage_rows writes with a scale of 1, from half the
// registers.
template <typename Layout, int kK, typename T>
__device__ __forceinline__ void stage_operand_rows(const OperandA<kK>& op, T* tile, int row0, int lane) {
  const int r = row0 + lane / 4;
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    const int col = 16 * kk + 2 * (lane % 4);
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r, col)) = op.a[kk][0];
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r + 8, col)) = op.a[kk][1];
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r, col + 8)) = op.a[kk][2];
    *reinterpret_cast<uint32_t*>(tile + Layout::offset(r + 8, col + 8)) = op.a[kk][3];
  }
}

// How store_rows walks a warp's 16 rows. kStepped: the row is cut into runs
// of a power of two 16-byte units, so that a round of 32 lanes covers whole
// rows of a run; each lane keeps one column of a run and steps its address
// down a fixed number of rows per round, so a store costs an add and a
// predicate instead of a 64-bit row product and a branch (the shared-memory
// read is unconditional: the staging tile holds all 16 rows). kPerUnit: each
// lane computes each unit's row and column afresh. kStepped was faster in the
// sm80 kernels and the sm90 forward and mixed or slower in the sm90 backward
// (docs/perf.md, "The output stores' address arithmetic"), which keeps
// kPerUnit, as does the sm80 forward at 128-token blocks (ForwardConfig).
enum class RowWalk { kStepped, kPerUnit };

// The largest power of two at most `units` and at most a warp's 32 lanes.
constexpr int widest_run(int units) {
  int run = 1;
  while (2 * run <= units && 2 * run <= 32)
    run *= 2;
  return run;
}

// The largest power of two that divides `units`, at most 32.
constexpr int equal_run(int units) {
  int run = 1;
  while (units % (2 * run) == 0 && 2 * run <= 32)
    run *= 2;
  return run;
}

// Whether a row of `units` is one or two widest runs (kStepped's first cut).
constexpr bool one_or_two_runs(int units) {
  const int rest = units - widest_run(units);
  return rest == 0 || rest == widest_run(rest);
}

// The cuts store_rows makes (in 16-byte units: 96 columns are 12): one run
// at 32, 64, 128, 256 columns; 64 + 32 at 96, 128 + 32 at 160, 128 + 64 at
// 192; seven equal runs of 32 at 224.
static_assert(one_or_two_runs(4) && one_or_two_runs(8) && one_or_two_runs(16) && one_or_two_runs(32));
static_assert(widest_run(12) == 8 && widest_run(20) == 16 && widest_run(24) == 16, "96, 160, 192: two runs");
static_assert(one_or_two_runs(12) && one_or_two_runs(20) && one_or_two_runs(24));
static_assert(!one_or_two_runs(28) && equal_run(28) == 4, "224 = 7 x 32");

// kStepped's stores of kRuns runs of kRun units each, side by side from column
// kCol0: one address per lane, the runs at fixed offsets from it.
template <typename Layout, int kCol0, int kRun, int kRuns, typename T>
__device__ __forceinline__ void store_runs(const T* tile, int row0, T* dst, int64_t row_stride, int valid_rows,
                                           int lane) {
  constexpr int kRowsPerRound = 32 / kRun;
  static_assert(kRowsPerRound <= 16, "runs of one unit would leave half the warp past the 16 rows");
  const int lane_row = lane / kRun, col = kCol0 + (lane % kRun) * 8;
  T* out = dst + (row0 + lane_row) * row_stride + col;
#pragma unroll
  for (int round = 0; round < 16 / kRowsPerRound; ++round) {
    if (round > 0) out += kRowsPerRound * row_stride;
    const int row = row0 + round * kRowsPerRound + lane_row;
#pragma unroll
    for (int run = 0; run < kRuns; ++run) {
      const uint4 v = *reinterpret_cast<const uint4*>(tile + Layout::offset(row, col + 8 * kRun * run));
      if (row < valid_rows) *reinterpret_cast<uint4*>(out + 8 * kRun * run) = v;
    }
  }
}

// Stores a warp's 16 staged rows [row0, row0 + 16) of a kCols-wide tile to
// `dst` (rows `row_stride` elements apart) with 16-byte stores, skipping rows
// at or past valid_rows.
//
// kStepped takes the widest runs where the row is one or two of them (96
// columns: 64 + 32; the sm80 backward at D = 96 gained 4 points of copy
// bandwidth where three runs of 32 gained 1.5) and equal runs otherwise (224
// columns: seven of 32; 128 + 64 + 32 cost the sm80 forward, at its register
// ceiling, 16 more bytes of spills and 2 points, seven runs gained 1.5).
template <typename Layout, int kCols, RowWalk kWalk = RowWalk::kStepped, typename T>
__device__ __forceinline__ void store_rows(const T* tile, int row0, T* dst, int64_t row_stride, int valid_rows,
                                           int lane) {
  static_assert(kCols % 16 == 0, "rows of whole pairs of 16-byte units");
  constexpr int kUnitsPerRow = kCols / 8;
  constexpr int kWide = widest_run(kUnitsPerRow), kRest = kUnitsPerRow - kWide;
  if constexpr (kWalk == RowWalk::kStepped && one_or_two_runs(kUnitsPerRow)) {
    store_runs<Layout, 0, kWide, 1>(tile, row0, dst, row_stride, valid_rows, lane);
    if constexpr (kRest > 0) store_runs<Layout, 8 * kWide, kRest, 1>(tile, row0, dst, row_stride, valid_rows, lane);
  } else if constexpr (kWalk == RowWalk::kStepped) {
    constexpr int kRun = equal_run(kUnitsPerRow);
    store_runs<Layout, 0, kRun, kUnitsPerRow / kRun>(tile, row0, dst, row_stride, valid_rows, lane);
  } else {
#pragma unroll
    for (int round = 0; round < kUnitsPerRow / 2; ++round) {  // 16 rows x kUnitsPerRow units over 32 lanes
      const int u = round * 32 + lane;
      const int row = row0 + u / kUnitsPerRow, col = (u % kUnitsPerRow) * 8;
      if (row < valid_rows)
        *reinterpret_cast<uint4*>(dst + row * row_stride + col) =
            *reinterpret_cast<const uint4*>(tile + Layout::offset(row, col));
    }
  }
}

// An output's way out: the warp's 16 x kN accumulator rows, scaled and
// rounded, staged in a kN-wide tile the warp owns, then (once every lane has
// written) its first kStoreCols columns stored to `dst` up to valid_rows
// (fewer than kN where a head's columns were padded to a whole tile).
template <typename Layout, typename T, int kN, int kStoreCols = kN, RowWalk kWalk = RowWalk::kStepped>
__device__ __forceinline__ void write_rows(const Accumulator<kN>& acc, const RowScale& scale, T* staging, int row0,
                                           T* dst, int64_t row_stride, int valid_rows, int lane) {
  static_assert(kStoreCols <= kN, "stores only columns the accumulator has");
  stage_rows<Layout, T>(acc, scale, staging, row0, 0, lane);
  __syncwarp();
  store_rows<Layout, kStoreCols, kWalk>(staging, row0, dst, row_stride, valid_rows, lane);
}

// Writes the first kStoreCols columns of a warp's 16 x kN accumulator rows
// (rows row0.. of `dst`, rows `row_stride` elements apart), scaled per row and
// rounded to T, straight from registers with 4-byte stores, skipping rows at
// or past valid_rows. For outputs that have no dead shared-memory tile to
// stage in, or too many columns to stage without spilling.
template <typename T, int kN, int kStoreCols = kN>
__device__ __forceinline__ void store_rows_direct(const Accumulator<kN>& acc, const RowScale& scale, T* dst,
                                                  int64_t row_stride, int row0, int valid_rows, int lane) {
  static_assert(kStoreCols <= kN && kStoreCols % 8 == 0, "whole fragments the accumulator has");
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + lane / 4 + 8 * r;
    if (row >= valid_rows) continue;
    T* out = dst + row * row_stride + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kStoreCols / 8; ++j)
      *reinterpret_cast<uint32_t*>(out + 8 * j) =
          pack2<T>(acc.c[j][2 * r] * scale.row[r], acc.c[j][2 * r + 1] * scale.row[r]);
  }
}

// Zeroes rows [valid_rows, kRows) of a kCols-wide tile with kThreads threads
// (`tid` in [0, kThreads)). Rows past a block's end hold the next sequence's
// values (or TMA zeros); products must see zeros there, since 0 * inf is NaN.
template <typename Layout, int kRows, int kCols, int kThreads, typename T>
__device__ __forceinline__ void zero_rows_from(T* tile, int valid_rows, int tid) {
  constexpr int kUnitsPerRow = kCols / 8;
  for (int u = tid; u < (kRows - valid_rows) * kUnitsPerRow; u += kThreads) {
    const int row = valid_rows + u / kUnitsPerRow, col = (u % kUnitsPerRow) * 8;
    *reinterpret_cast<uint4*>(tile + Layout::offset(row, col)) = make_uint4(0, 0, 0, 0);
  }
}

}  // namespace blockattn::tile
