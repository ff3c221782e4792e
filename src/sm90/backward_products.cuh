// The backward's products whose A operand comes from registers: dV = P^T dO,
// dK = dS^T Q (A = a transposed P or dS tile read from shared memory) and
// dQ = dS K (A = dS itself). Shared by the per-consumer-tile backward
// (backward_kernel.cuh) and the shared-tile one (shared_tile_backward.cuh).
#pragma once

#include "sm90/wgmma.cuh"
#include "tile/fragments.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn::sm90 {

// A-operand fragments of X^T for this warp's 16 key rows, k-step by k-step,
// from a kRows x kKeys tile X [query][key] (ldmatrix.trans, as in the sm80
// gemm_atb). All k-steps are loaded before any wgmma reads them: a register
// must not change while an in-flight wgmma may still read it.
template <typename T, int kRows, int kKeys>
__device__ __forceinline__ tile::OperandA<kRows> transposed_rows(const T* x, int key0, int lane) {
  using Layout = tile::SwizzledRows<kKeys>;
  const uint32_t base = tile::smem_u32(x);
  tile::OperandA<kRows> op;
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    tile::ldmatrix_x4_trans(
        op.a[kk], tile::smem_addr<Layout>(base, kk * 16 + (lane % 8) + (lane / 16) * 8, key0 + ((lane / 8) % 2) * 8));
  return op;
}

// D[warpgroup rows x D] = A (registers, K = the tile's rows) * B (an
// MN-major tile laid out as `Layout`): dV = P^T dO, dK = dS^T Q, dQ = dS K.
// Waits for the result.
template <typename T, int D, typename Layout, int kRows = Layout::kRowCount>
__device__ __forceinline__ void wgmma_rs_tile(tile::Accumulator<D>& d, tile::OperandA<kRows>& a, uint32_t b_addr) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    wgmma_rs<T, D>(d.regs(), a.a[kk], mnmajor_desc<Layout>(b_addr, kk), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(d.regs());
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    fence_registers(a.a[kk]);
}

}  // namespace blockattn::sm90
