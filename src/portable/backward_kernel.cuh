// Portable (sm_80+) backward kernel: one CTA tile per (block, KV head). For each
// query head of the KV group it recomputes P from Q and K, forms
// dS = P * (dP - rowsum(P * dP)) in registers (no preprocessing kernel, no
// stored forward output), and accumulates dK and dV over the group in registers,
// so the result is deterministic without atomics.
//
// Warp w owns query rows [16w, 16w+16) for S, dP, dS and dQ, and key rows
// [16w, 16w+16) for dK and dV, which reduce over all query rows: P and dS go
// through shared memory for those two products.
#pragma once

#include "common/opaque.cuh"
#include "portable/block_rows.cuh"
#include "portable/softmax.cuh"

namespace blockattn::portable {

template <typename T, int D>
struct BackwardConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kTileElems = kBlockSize * D;
  static constexpr int kProbElems = kBlockSize * kBlockSize;
  // Q, K, V, dO tiles, a dQ staging tile, then P and dS.
  static constexpr int kSmemBytes = (5 * kTileElems + 2 * kProbElems) * 2;
  static constexpr int kMinCtasPerSm = D == 64 ? 3 : 2;
};

template <typename T, int D>
struct BackwardSmem {
  T* q;
  T* k;
  T* v;
  T* dout;
  T* dq;
  T* probs;
  T* dscores;

  __device__ explicit BackwardSmem(unsigned char* base) {
    using Cfg = BackwardConfig<T, D>;
    q = reinterpret_cast<T*>(base);
    k = q + Cfg::kTileElems;
    v = k + Cfg::kTileElems;
    dout = v + Cfg::kTileElems;
    dq = dout + Cfg::kTileElems;
    probs = dq + Cfg::kTileElems;
    dscores = probs + Cfg::kProbElems;
  }
};

// Gradients for one query head: accumulates this warp's key rows of dK (unscaled)
// and dV, and writes this warp's rows of dQ. Q and dO of the head are in smem.
template <typename T, int D>
__device__ __forceinline__ void backward_query_head(const KernelParams& p, const BackwardSmem<T, D>& sm,
                                                    const schedule::BlockDesc& block, int q_head, Accumulator<D>& dk,
                                                    Accumulator<D>& dv) {
  const int tid = opaque(static_cast<int>(threadIdx.x));  // see common/opaque.cuh
  const int lane = tid % 32, row0 = 16 * (tid / 32);
  const int valid = block.row_count;

  // P = softmax(scale * Q K^T), normalized; rows past the block end are zeroed
  // so they add nothing to dK and dV.
  Accumulator<kBlockSize> probs;
  probs.zero();
  gemm_abt<T, kBlockSize, D>(probs, sm.q, row0, sm.k, lane);
  float row_sum[2];
  exp_rows_masked(probs, valid, p.scale_log2, row_sum, lane);
  const float inv[2] = {row0 + lane / 4 < valid ? 1.f / row_sum[0] : 0.f,
                        row0 + lane / 4 + 8 < valid ? 1.f / row_sum[1] : 0.f};

  // dP = dO V^T, then dS = P * (dP - sum_j P_j dP_j) per row.
  Accumulator<kBlockSize> ds;
  ds.zero();
  gemm_abt<T, kBlockSize, D>(ds, sm.dout, row0, sm.v, lane);
  float dot[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < kBlockSize / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      probs.c[j][e] *= inv[e >> 1];
      dot[e >> 1] += probs.c[j][e] * ds.c[j][e];
    }
  dot[0] = quad_sum(dot[0]);
  dot[1] = quad_sum(dot[1]);
#pragma unroll
  for (int j = 0; j < kBlockSize / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      ds.c[j][e] = probs.c[j][e] * (ds.c[j][e] - dot[e >> 1]);

  store_accumulator<T, kBlockSize, kBlockSize>(probs, sm.probs, row0, 0, lane);
  store_accumulator<T, kBlockSize, kBlockSize>(ds, sm.dscores, row0, 0, lane);
  const OperandA<kBlockSize> ds_op = to_operand<T>(ds);  // for dQ; packed early to free registers
  __syncthreads();

  // dV += P^T dO and dK += dS^T Q over all 64 query rows, for this warp's keys.
  gemm_atb<T, D, kBlockSize, kBlockSize>(dv, sm.probs, row0, sm.dout, lane);
  gemm_atb<T, D, kBlockSize, kBlockSize>(dk, sm.dscores, row0, sm.q, lane);

  // dQ = scale * dS K, in 64-column slices to bound registers, staged in the
  // warp's own rows of the dQ tile.
#pragma unroll
  for (int c = 0; c < D / 64; ++c) {
    Accumulator<64> dq;
    dq.zero();
    gemm_rab<T, 64, kBlockSize, D>(dq, ds_op, sm.k, 64 * c, lane);
    dq.scale(p.softmax_scale);
    store_accumulator<T, 64, D>(dq, sm.dq, row0, 64 * c, lane);
  }
  __syncwarp();
  store_warp_rows<D>(sm.dq, row0, head_rows_out<T>(p.dq, block, q_head), p.dq.token_stride, valid, lane);
}

template <typename T, int D>
__global__ void __launch_bounds__(BackwardConfig<T, D>::kThreads, BackwardConfig<T, D>::kMinCtasPerSm)
    backward_kernel(const __grid_constant__ KernelParams p) {
  using Cfg = BackwardConfig<T, D>;
  constexpr int kT = Cfg::kThreads;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardSmem<T, D> sm(smem);
  const int lane = threadIdx.x % 32, row0 = 16 * (threadIdx.x / 32);
  const int num_kv_heads = p.num_q_heads / p.group_size;
  const int num_tiles = *p.block_count * num_kv_heads;

  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const int block_index = tile / num_kv_heads;
    const int kv_head = tile - block_index * num_kv_heads;
    const schedule::BlockDesc block = p.blocks[block_index];
    const int valid = block.row_count;

    load_tile_async<kBlockSize, D, kT>(sm.k, head_rows<T>(p.k, block, kv_head), p.k.token_stride, valid);
    load_tile_async<kBlockSize, D, kT>(sm.v, head_rows<T>(p.v, block, kv_head), p.v.token_stride, valid);

    Accumulator<D> dk, dv;
    dk.zero();
    dv.zero();
    for (int g = 0; g < p.group_size; ++g) {
      const int q_head = kv_head * p.group_size + g;
      load_tile_async<kBlockSize, D, kT>(sm.q, head_rows<T>(p.q, block, q_head), p.q.token_stride, valid);
      load_tile_async<kBlockSize, D, kT>(sm.dout, head_rows<T>(p.dout, block, q_head), p.dout.token_stride, valid);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      backward_query_head<T, D>(p, sm, block, q_head, dk, dv);
      __syncthreads();  // Q, dO, P and dS are rewritten next
    }

    // K and V are no longer read: stage this warp's dK and dV rows there.
    dk.scale(p.softmax_scale);
    store_accumulator<T, D, D>(dk, sm.k, row0, 0, lane);
    store_accumulator<T, D, D>(dv, sm.v, row0, 0, lane);
    __syncwarp();
    store_warp_rows<D>(sm.k, row0, head_rows_out<T>(p.dk, block, kv_head), p.dk.token_stride, valid, lane);
    store_warp_rows<D>(sm.v, row0, head_rows_out<T>(p.dv, block, kv_head), p.dv.token_stride, valid, lane);
    __syncthreads();  // staging reads finish before the next tile's loads land
  }
}

}  // namespace blockattn::portable
