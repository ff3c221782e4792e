// sm80 backward kernel: one CTA tile per (block, KV head). For each query head
// of the KV group it recomputes P from Q and K, forms dS in registers
// (tile/softmax.cuh: no preprocessing kernel, no stored forward output), and
// accumulates dK and dV over the group in registers, so the result is
// deterministic without atomics.
//
// Warp w owns query rows [16w, 16w+16) for S, dP, dS and dQ, and key rows
// [16w, 16w+16) for dK and dV, which reduce over all query rows: P and dS go
// through shared memory for those two products.
#pragma once

#include "common/kernel_launcher.cuh"
#include "common/opaque.cuh"
#include "sm80/params.h"
#include "sm80/tile_loads.cuh"
#include "sm80/warp_gemm.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm80 {

template <typename T, int D, int B>
struct BackwardConfig {
  static_assert(B == 32 || B == 64, "one warp per 16 rows of a 32- or 64-token block");
  static constexpr int kRows = B;  // query rows and key rows of a tile
  static constexpr int kKeys = B;  // key columns of S, dP, dS
  static constexpr int kWarps = kRows / 16;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kTileElems = kRows * D;
  static constexpr int kProbElems = kRows * kKeys;
  // Q, K, V, dO tiles, a dQ staging tile, then P and dS.
  static constexpr int kSmemBytes = (5 * kTileElems + 2 * kProbElems) * 2;
  static constexpr int kMinCtasPerSm = D <= 64 ? 3 : 2;
};

template <typename T, int D, int B>
struct BackwardSmem {
  T* q;
  T* k;
  T* v;
  T* dout;
  T* dq;
  T* probs;
  T* dscores;

  __device__ explicit BackwardSmem(unsigned char* base) {
    using Cfg = BackwardConfig<T, D, B>;
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
template <typename T, int D, int B, typename Hooks>
__device__ __forceinline__ void backward_query_head(const Params& p, const Hooks& hooks,
                                                    const BackwardSmem<T, D, B>& sm, const tile::TileCoords& t,
                                                    tile::Accumulator<D>& dk, tile::Accumulator<D>& dv) {
  using Cfg = BackwardConfig<T, D, B>;
  constexpr int kKeys = Cfg::kKeys;
  const int tid = opaque(static_cast<int>(threadIdx.x));  // see common/opaque.cuh
  const int lane = tid % 32, row0 = 16 * (tid / 32);
  const int valid = t.block.row_count;

  // P = softmax(scale * Q K^T) and dP = dO V^T, then dS, all in registers.
  tile::Accumulator<kKeys> probs;
  probs.zero();
  gemm_abt<T, kKeys, D>(probs, sm.q, row0, sm.k, lane);
  float row_sum[2];
  tile::exp_rows_masked(probs, valid, p.attn.scale_log2, row_sum, lane);
  // Where 1/row_sum is formed (before or after the dP product) only moves
  // ptxas's register allocation; each head dim takes the placement that
  // measured fewest spill bytes (docs/perf.md, "architecture refactor").
  tile::RowScale inv;
  if constexpr (D <= 64) inv = tile::inverse_valid_rows(row_sum, row0, valid, lane);
  tile::Accumulator<kKeys> ds;
  ds.zero();
  gemm_abt<T, kKeys, D>(ds, sm.dout, row0, sm.v, lane);
  if constexpr (D > 64) inv = tile::inverse_valid_rows(row_sum, row0, valid, lane);
  tile::softmax_grad_rows(probs, ds, inv);

  using ProbLayout = tile::SwizzledRows<kKeys>;
  const tile::RowScale one = tile::RowScale::uniform(1.f);
  tile::stage_rows<ProbLayout, T>(probs, one, sm.probs, row0, 0, lane);
  tile::stage_rows<ProbLayout, T>(ds, one, sm.dscores, row0, 0, lane);
  const tile::OperandA<kKeys> ds_op = tile::to_operand<T>(ds);  // for dQ; packed early to free registers
  __syncthreads();

  // dV += P^T dO and dK += dS^T Q over all query rows, for this warp's keys.
  gemm_atb<T, D, Cfg::kRows, kKeys>(dv, sm.probs, row0, sm.dout, lane);
  gemm_atb<T, D, Cfg::kRows, kKeys>(dk, sm.dscores, row0, sm.q, lane);

  // dQ = scale * dS K, in 64-column slices to bound registers (whole rows
  // where the epilogue needs them), staged in the warp's own rows of the dQ tile.
  using Layout = tile::SwizzledRows<D>;
  constexpr int kDqCols = Hooks::kWholeRows ? D : 64;
#pragma unroll
  for (int c = 0; c < D / kDqCols; ++c) {
    tile::Accumulator<kDqCols> dq;
    dq.zero();
    gemm_rab<T, kDqCols, kKeys, D>(dq, ds_op, sm.k, kDqCols * c, lane);
    hooks.epilogue(tile::Output::kDq, dq, t, row0, kDqCols * c, lane);
    tile::stage_rows<Layout, T>(dq, tile::RowScale::uniform(p.attn.softmax_scale), sm.dq, row0, kDqCols * c, lane);
  }
  __syncwarp();
  tile::store_rows<Layout, D>(sm.dq, row0, tile::head_rows_out<T>(p.dq, t.block, t.q_head), p.dq.token_stride, valid,
                              lane);
}

template <typename T, int D, int B, core::Fusion F>
__global__ void __launch_bounds__(BackwardConfig<T, D, B>::kThreads, BackwardConfig<T, D, B>::kMinCtasPerSm)
    backward_kernel(const __grid_constant__ Params p) {
  using Hooks = tile::Hooks<F>;
  using Cfg = BackwardConfig<T, D, B>;
  using Layout = tile::SwizzledRows<D>;
  constexpr int kT = Cfg::kThreads, kRows = Cfg::kRows;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardSmem<T, D, B> sm(smem);
  const Hooks hooks(p.attn);
  const int lane = threadIdx.x % 32, row0 = 16 * (threadIdx.x / 32);
  const int num_kv_heads = p.attn.num_q_heads / p.attn.group_size;
  const int num_tiles = p.attn.schedule.block_count() * num_kv_heads;

  for (int tile_index = blockIdx.x; tile_index < num_tiles; tile_index += gridDim.x) {
    const tile::TileCoords t = tile::TileCoords::per_kv_head(p.attn, num_kv_heads, tile_index);
    const int valid = t.block.row_count;

    load_tile_async<kRows, D, kT>(sm.k, tile::head_rows<T>(p.k, t.block, t.kv_head), p.k.token_stride, valid);
    load_tile_async<kRows, D, kT>(sm.v, tile::head_rows<T>(p.v, t.block, t.kv_head), p.v.token_stride, valid);

    tile::Accumulator<D> dk, dv;
    dk.zero();
    dv.zero();
    for (int g = 0; g < p.attn.group_size; ++g) {
      const tile::TileCoords th{t.block, t.q_head + g, t.kv_head, t.block_index};  // this query head of the group
      load_tile_async<kRows, D, kT>(sm.q, tile::head_rows<T>(p.q, th.block, th.q_head), p.q.token_stride, valid);
      load_tile_async<kRows, D, kT>(sm.dout, tile::head_rows<T>(p.dout, th.block, th.q_head), p.dout.token_stride,
                                    valid);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      // K and V stay in shared memory across the group: transformed once.
      hooks.template prologue<Layout, kRows, D, kT>(th, threadIdx.x, sm.q, g == 0 ? sm.k : nullptr,
                                                    g == 0 ? sm.v : nullptr);
      if constexpr (Hooks::kModifiesOperands) __syncthreads();  // prologue writes before any product
      backward_query_head<T, D, B>(p, hooks, sm, th, dk, dv);
      __syncthreads();  // Q, dO, P and dS are rewritten next
    }

    // K and V are no longer read: stage this warp's dK and dV rows there.
    hooks.epilogue(tile::Output::kDk, dk, t, row0, 0, lane);
    hooks.epilogue(tile::Output::kDv, dv, t, row0, 0, lane);
    tile::stage_rows<Layout, T>(dk, tile::RowScale::uniform(p.attn.softmax_scale), sm.k, row0, 0, lane);
    tile::stage_rows<Layout, T>(dv, tile::RowScale::uniform(1.f), sm.v, row0, 0, lane);
    __syncwarp();
    tile::store_rows<Layout, D>(sm.k, row0, tile::head_rows_out<T>(p.dk, t.block, t.kv_head), p.dk.token_stride, valid,
                                lane);
    tile::store_rows<Layout, D>(sm.v, row0, tile::head_rows_out<T>(p.dv, t.block, t.kv_head), p.dv.token_stride, valid,
                                lane);
    __syncthreads();  // staging reads finish before the next tile's loads land
  }
}

}  // namespace blockattn::sm80

BLOCKATTN_KERNEL_OF(sm80, Backward, backward_kernel, BackwardConfig)
