// The backward's products: S and dP with the softmax between them
// (issue_scores, softmax_of_scores), and those whose A operand comes from
// registers: dV = P^T dO, dK = dS^T Q (A = a transposed P or dS tile read
// from shared memory) and dQ = dS K (A = dS itself), and how their results
// leave. Shared by the sm90 backward kernels (backward_kernel.cuh,
// shared_tile_backward.cuh, column_split_backward.cuh, grouped_backward.cuh).
#pragma once

#include "sm90/wgmma.cuh"
#include "tile/fragments.cuh"
#include "tile/row_io.cuh"
#include "tile/smem_layout.cuh"
#include "tile/softmax.cuh"

namespace blockattn::sm90 {

// How the backward kernels store their outputs' rows: per unit. The stepped
// walk the other kernels use was mixed here (H100: tail-d64 -3 points,
// sweep-d64-L256 +2; H200: tail-d128 +8, sweep-d128-L256 -3), and at D = 96
// and 160, in runs inside one 32-column chunk (which reads the staging tile
// without the per-unit walk's bank conflicts), 2 points slower (docs/perf.md,
// "The output stores' address arithmetic" and "The D = 96 sm_90 backward").
constexpr tile::RowWalk kRowWalk = tile::RowWalk::kPerUnit;

// The per-tile backward's stores of a warp's staged rows, walked as the
// host chose (Params::stepped_stores, backward_stores_stepped() in params.h:
// stepped for short sequences on fast memory).
template <typename Layout, int kCols, typename T>
__device__ __forceinline__ void store_staged_rows_walked(bool stepped, const T* staging, int row0, T* dst,
                                                         int64_t row_stride, int valid_rows, int lane) {
  if (stepped)
    tile::store_rows<Layout, kCols, tile::RowWalk::kStepped>(staging, row0, dst, row_stride, valid_rows, lane);
  else
    tile::store_rows<Layout, kCols, kRowWalk>(staging, row0, dst, row_stride, valid_rows, lane);
}

// S = Q K^T and dP = dO V^T over a warpgroup's 64 rows, issued as two groups so
// that the exponentials of S can run while dP's product does
// (softmax_of_scores).
template <typename T, int kRows, int D, typename Layout>
__device__ __forceinline__ void issue_scores(tile::Accumulator<kRows>& s, tile::Accumulator<kRows>& ds, uint32_t q_addr,
                                             uint32_t dout_addr, uint32_t k_addr, uint32_t v_addr) {
  wgmma_fence();
  issue_ss_product<T, kRows, D, Layout>(s.regs(), q_addr, k_addr);
  wgmma_commit();
  issue_ss_product<T, kRows, D, Layout>(ds.regs(), dout_addr, v_addr);
  wgmma_commit();
}

// Waits for issue_scores' two groups in turn: S into P (normalized, rows past
// the block's end zeroed) while dP's product runs, then dP into dS, times
// ds_scale (tile::softmax_grad_rows). Returns whether kShift's exponentials
// held (tile::exp_rows); where they did not, P and dS are to be redone with
// the row max.
template <tile::RowShift kShift = tile::RowShift::kRowMax, int kRows>
__device__ __forceinline__ bool softmax_of_scores(tile::Accumulator<kRows>& s, tile::Accumulator<kRows>& ds,
                                                  const schedule::BlockDesc& block, int row0, float scale_log2,
                                                  int lane, float ds_scale = 1.f) {
  wgmma_wait<1>();
  fence_registers(s.regs());
  float row_sum[2];
  const bool held = tile::exp_rows_in_tile<kRows, kShift>(s, block, row0, scale_log2, row_sum, lane);
  wgmma_wait<0>();
  fence_registers(ds.regs());
  tile::softmax_grad_rows(s, ds, tile::inverse_valid_rows(row_sum, row0, block.row_count, lane), ds_scale);
  return held;
}

// A-operand fragments of X^T for this warp's 16 key rows, k-step by k-step,
// from a kRows x kKeys tile X [query][key] laid out as `Layout` (ldmatrix.trans,
// as in the sm80 gemm_atb). All k-steps are loaded before any wgmma reads
// them: a register must not change while an in-flight wgmma may still read it.
template <typename T, int kRows, int kKeys, typename Layout = tile::SwizzledRows<kKeys>>
__device__ __forceinline__ tile::OperandA<kRows> transposed_rows(const T* x, int key0, int lane) {
  const uint32_t base = tile::smem_u32(x);
  tile::OperandA<kRows> op;
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    tile::ldmatrix_x4_trans(
        op.a[kk], tile::smem_addr<Layout>(base, kk * 16 + (lane % 8) + (lane / 16) * 8, key0 + ((lane / 8) % 2) * 8));
  return op;
}

// Issues D[warpgroup rows x D] (+)= A (registers, K = the tile's rows) * B
// (an MN-major tile laid out as `Layout`): dV = P^T dO, dK = dS^T Q, dQ =
// dS K; `accumulate` adds to D (a sum over a group's heads) instead of
// overwriting it. Between wgmma_fence() and wgmma_commit(); the caller waits.
template <typename T, int D, typename Layout, int kRows = Layout::kRowCount>
__device__ __forceinline__ void issue_rs_product(tile::Accumulator<D>& d, tile::OperandA<kRows>& a, uint32_t b_addr,
                                                 bool accumulate) {
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    wgmma_rs<T, D>(d.regs(), a.a[kk], mnmajor_desc<Layout>(b_addr, kk), accumulate || kk > 0);
}

// After wgmma_wait: neither the result nor the A operand's registers may be
// touched by code the compiler moves above the wait.
template <int D, int kRows>
__device__ __forceinline__ void fence_rs_product(tile::Accumulator<D>& d, tile::OperandA<kRows>& a) {
  fence_registers(d.regs());
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    fence_registers(a.a[kk]);
}

// One such product, waited for.
template <typename T, int D, typename Layout, int kRows = Layout::kRowCount>
__device__ __forceinline__ void wgmma_rs_tile(tile::Accumulator<D>& d, tile::OperandA<kRows>& a, uint32_t b_addr) {
  wgmma_fence();
  issue_rs_product<T, D, Layout>(d, a, b_addr, false);
  wgmma_commit();
  wgmma_wait<0>();
  fence_rs_product(d, a);
}

}  // namespace blockattn::sm90
