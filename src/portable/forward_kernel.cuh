// Portable (sm_80+) forward kernel: one 64-query x 64-key tile per (block, query
// head), processed by a persistent CTA of four warps, each warp owning 16 query
// rows end to end (S, softmax, P V, normalization, store).
//
// Pipeline: two shared-memory stages of {Q, K, V}. While a CTA computes tile i
// from one stage, cp.async fills the other with tile i + gridDim.x. The output
// is staged in the warp's own Q rows (no other warp reads them, and S is done)
// and leaves as 16-byte stores that nothing waits for.
#pragma once

#include "common/opaque.cuh"
#include "portable/block_rows.cuh"
#include "portable/softmax.cuh"
#include "schedule/tile_coords.cuh"

namespace blockattn::portable {

template <typename T, int D>
struct ForwardConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = 2;
  static constexpr int kTileElems = kBlockSize * D;
  static constexpr int kStageBytes = 3 * kTileElems * 2;  // Q, K, V
  static constexpr int kSmemBytes = kStages * kStageBytes;
  // Enough resident CTAs to keep loads in flight; bounds registers accordingly.
  static constexpr int kMinCtasPerSm = D == 64 ? 3 : 2;
};

using schedule::ForwardTileCoords;

template <typename T, int D>
__device__ __forceinline__ void forward_issue_loads(const KernelParams& p, int tile, T* stage) {
  using Cfg = ForwardConfig<T, D>;
  const auto t = ForwardTileCoords::at(p.blocks, p.num_q_heads, p.group_size, tile);
  constexpr int kE = Cfg::kTileElems;
  load_tile_async<kBlockSize, D, Cfg::kThreads>(stage, head_rows<T>(p.q, t.block, t.q_head), p.q.token_stride,
                                                t.block.row_count);
  load_tile_async<kBlockSize, D, Cfg::kThreads>(stage + kE, head_rows<T>(p.k, t.block, t.kv_head), p.k.token_stride,
                                                t.block.row_count);
  load_tile_async<kBlockSize, D, Cfg::kThreads>(stage + 2 * kE, head_rows<T>(p.v, t.block, t.kv_head), p.v.token_stride,
                                                t.block.row_count);
}

template <typename T, int D>
__device__ __forceinline__ void forward_compute_tile(const KernelParams& p, int tile, T* stage) {
  using Cfg = ForwardConfig<T, D>;
  const int tid = opaque(static_cast<int>(threadIdx.x));  // see common/opaque.cuh
  const int lane = tid % 32, row0 = 16 * (tid / 32);
  const auto t = ForwardTileCoords::at(p.blocks, p.num_q_heads, p.group_size, tile);
  T* q_tile = stage;
  const T* k_tile = stage + Cfg::kTileElems;
  const T* v_tile = stage + 2 * Cfg::kTileElems;

  Accumulator<kBlockSize> s;
  s.zero();
  gemm_abt<T, kBlockSize, D>(s, q_tile, row0, k_tile, lane);

  float row_sum[2];
  exp_rows_masked(s, t.block.row_count, p.scale_log2, row_sum, lane);
  const OperandA<kBlockSize> probs = to_operand<T>(s);

  Accumulator<D> o;
  o.zero();
  gemm_rab<T, D, kBlockSize, D>(o, probs, v_tile, 0, lane);

  // Normalize (row_sum >= 1 for every row: its max term is exp2(0)).
  const float inv[2] = {1.f / row_sum[0], 1.f / row_sum[1]};
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    o.c[j][0] *= inv[0];
    o.c[j][1] *= inv[0];
    o.c[j][2] *= inv[1];
    o.c[j][3] *= inv[1];
  }
  // The warp's Q rows are dead (only this warp read them): stage O there,
  // once every lane's ldmatrix reads of them are behind it.
  __syncwarp();
  store_accumulator<T, D, D>(o, q_tile, row0, 0, lane);
  __syncwarp();
  store_warp_rows<D>(q_tile, row0, head_rows_out<T>(p.out, t.block, t.q_head), p.out.token_stride, t.block.row_count,
                     lane);
}

template <typename T, int D>
__global__ void __launch_bounds__(ForwardConfig<T, D>::kThreads, ForwardConfig<T, D>::kMinCtasPerSm)
    forward_kernel(const __grid_constant__ KernelParams p) {
  using Cfg = ForwardConfig<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  // Stage s starts at smem + s * kStageBytes (arithmetic, not an array of
  // pointers: a runtime-indexed array would live in local memory).
  auto stage_ptr = [&](int s) { return reinterpret_cast<T*>(smem + s * Cfg::kStageBytes); };

  const int num_tiles = *p.block_count * p.num_q_heads;
  int tile = blockIdx.x;
  if (tile >= num_tiles) return;
  forward_issue_loads<T, D>(p, tile, stage_ptr(0));
  cp_async_commit();

  for (int stage = 0; tile < num_tiles; tile += gridDim.x, stage ^= 1) {
    const int next = tile + gridDim.x;
    if (next < num_tiles) forward_issue_loads<T, D>(p, next, stage_ptr(stage ^ 1));
    cp_async_commit();  // possibly empty: keeps "all but the newest group" meaning the current tile
    cp_async_wait<1>();
    __syncthreads();
    forward_compute_tile<T, D>(p, tile, stage_ptr(stage));
    __syncthreads();  // this stage is refilled next iteration
  }
}

}  // namespace blockattn::portable
