// sm80 dense forward kernel: the correct-everywhere fallback of the dense
// forward (include/blockattn/dense.h), not tuned. A persistent CTA of four
// warps takes work units (64 query rows of one (batch, head),
// tile/dense_schedule.cuh) and walks their key tiles with two cp.async stages
// of {K, V}; each warp owns 16 query rows end to end: S = Q K^T, online
// softmax (tile/online_softmax.cuh), O = O * rescale + P V, normalization.
// The output is staged in the warp's own Q rows and leaves with 16-byte
// stores that skip rows past the sequence end.
#pragma once

#include "common/kernel_launcher.cuh"
#include "common/opaque.cuh"
#include "sm80/params.h"
#include "sm80/tile_loads.cuh"
#include "sm80/warp_gemm.cuh"
#include "tile/dense_schedule.cuh"
#include "tile/online_softmax.cuh"
#include "tile/row_io.cuh"

namespace blockattn::sm80 {

template <typename T, int D>
struct DenseForwardConfig {
  static constexpr int kRows = kDenseRowsPerUnit;  // query rows of a work unit: 16 per warp
  // Keys per tile: fewer as O (D / 2 registers per thread) grows, so that S,
  // P and O stay in registers without spilling.
  static constexpr int kKeys = D <= 64 ? 64 : 4096 / D;
  static constexpr int kThreads = 128;
  static constexpr int kQElems = kRows * D;
  static constexpr int kKvElems = kKeys * D;                           // one of K, V
  static constexpr int kSmemBytes = 2 * (kQElems + 2 * 2 * kKvElems);  // Q + two stages of K, V
};

template <typename T>
__device__ __forceinline__ const T* dense_rows(const DenseTensorView& t, int batch, int head, int row) {
  return static_cast<const T*>(t.data) + batch * t.batch_stride + head * t.head_stride + row * t.seq_stride;
}

template <typename T, int D>
__device__ __forceinline__ void dense_issue_kv_loads(const DenseParams& p, const tile::DenseUnit& u, int tile, T* k,
                                                     T* v) {
  using Cfg = DenseForwardConfig<T, D>;
  const int key0 = tile * Cfg::kKeys, valid = p.attn.seq_len - key0;
  load_tile_async<Cfg::kKeys, D, Cfg::kThreads>(k, dense_rows<T>(p.k, u.batch, u.kv_head, key0), p.k.seq_stride, valid);
  load_tile_async<Cfg::kKeys, D, Cfg::kThreads>(v, dense_rows<T>(p.v, u.batch, u.kv_head, key0), p.v.seq_stride, valid);
}

template <typename T, int D, bool kCausal>
__device__ __forceinline__ void dense_forward_unit(const DenseParams& p, const tile::DenseUnit& u, T* q, T* kv) {
  using Cfg = DenseForwardConfig<T, D>;
  using Layout = tile::SwizzledRows<D>;
  const int tid = opaque(static_cast<int>(threadIdx.x));  // see common/opaque.cuh
  const int lane = tid % 32, row0 = 16 * (tid / 32);
  const auto tiles = tile::KeyTiles<Cfg::kKeys>::of(p.attn, u.row0, Cfg::kRows);
  auto k_of = [&](int stage) { return kv + stage * 2 * Cfg::kKvElems; };
  auto v_of = [&](int stage) { return kv + stage * 2 * Cfg::kKvElems + Cfg::kKvElems; };

  load_tile_async<Cfg::kRows, D, Cfg::kThreads>(q, dense_rows<T>(p.q, u.batch, u.q_head, u.row0), p.q.seq_stride,
                                                p.attn.seq_len - u.row0);
  dense_issue_kv_loads<T, D>(p, u, 0, k_of(0), v_of(0));
  cp_async_commit();

  int limit[2];
  tile::key_limits(u.row0 + row0, p.attn.seq_len, kCausal, lane, limit);
  tile::OnlineSoftmax softmax;
  softmax.init();
  tile::Accumulator<D> o;
  o.zero();
  for (int n = 0, stage = 0; n < tiles.count; ++n, stage ^= 1) {
    if (n + 1 < tiles.count) dense_issue_kv_loads<T, D>(p, u, n + 1, k_of(stage ^ 1), v_of(stage ^ 1));
    cp_async_commit();  // possibly empty: keeps "all but the newest group" meaning tile n
    cp_async_wait<1>();
    __syncthreads();

    tile::Accumulator<Cfg::kKeys> s;
    s.zero();
    gemm_abt<T, Cfg::kKeys, D>(s, q, row0, k_of(stage), lane);
    if (n >= tiles.first_masked) tile::mask_key_columns(s, n * Cfg::kKeys, limit, lane);
    tile::scale_rows(o, softmax.update(s, p.attn.scale_log2));
    gemm_rab<T, D, Cfg::kKeys, D>(o, tile::to_operand<T>(s), v_of(stage), 0, lane);
    __syncthreads();  // this stage is refilled next iteration
  }

  float lse[2];
  const tile::RowScale inverse = softmax.finish(p.attn.scale_log2, lse);
  const int valid_rows = p.attn.seq_len - u.row0;
  // The warp's Q rows are dead (only this warp read them): stage O there.
  __syncwarp();
  tile::write_rows<Layout>(o, inverse, q, row0, tile::unit_rows<T>(p.out, u, u.q_head), p.out.seq_stride, valid_rows,
                           lane);
  tile::write_lse(p.attn, u, row0, lse, lane);
  __syncthreads();  // every warp's stores read its Q rows before the next unit's loads overwrite them
}

template <typename T, int D, bool kCausal>
__global__ void __launch_bounds__(DenseForwardConfig<T, D>::kThreads, 1)
    dense_forward_kernel(const __grid_constant__ DenseParams p) {
  using Cfg = DenseForwardConfig<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q = reinterpret_cast<T*>(smem);
  T* kv = q + Cfg::kQElems;
  // Blocks from row 0: its loads start at the unit's first row (dense_attn_params, no shift step).
  tile::for_each_dense_unit<false>(p.attn, Cfg::kRows,
                                   [&](const tile::DenseUnit& u) { dense_forward_unit<T, D, kCausal>(p, u, q, kv); });
}

}  // namespace blockattn::sm80

BLOCKATTN_DENSE_KERNEL_OF(sm80, dense_forward_kernel, DenseForwardConfig)
