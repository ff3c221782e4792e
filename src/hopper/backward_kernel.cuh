// sm_90a backward kernel: the forward's persistent, warp-specialized TMA
// pipeline, with the five products of the backward on wgmma.
//
// Tiles are (block, head) with Hq == Hkv: grouped-query attention runs on the
// portable backward, whose dK/dV accumulate over the group in registers; here
// the 168 registers a thread has at 3 warpgroups per SM (ptxas allocates for
// the launch bound) leave no room for accumulators that live across heads.
// The producer TMA-loads Q, K, V and dO of each tile into a ring of stages;
// two consumer warpgroups take alternate tiles.
//
// Per tile, in one consumer warpgroup (warp w owns query rows and key rows
// [16w, 16w + 16)):
//   S = Q K^T, dP = dO V^T        wgmma, both operands K-major in shared memory
//   P = softmax(S), dS = P (dP - rowsum(P dP))   fp32 registers
//   P, dS -> shared memory, read back transposed (ldmatrix.trans) as A operands
//   dV = P^T dO, dK = dS^T Q      wgmma, A from registers, B MN-major
//   dQ = scale dS K               wgmma, A = dS from registers, 64 columns at a time
// dV leaves through the tile's V buffer, dQ through dO, dK through K, each
// once no warp reads that buffer any more (which orders the products dV, dQ,
// dK and keeps one accumulator live at a time). Stores skip rows past the
// block end.
#pragma once

#include "common/opaque.cuh"
#include "hopper/params.h"
#include "hopper/sync.cuh"
#include "hopper/tile_io.cuh"
#include "portable/block_rows.cuh"
#include "portable/softmax.cuh"
#include "schedule/tile_coords.cuh"

namespace blockattn::hopper {

using portable::Accumulator;
using portable::OperandA;

template <typename T, int D>
struct BackwardConfig {
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kChunks = D / kChunkCols;
  static constexpr int kChunkBytes = kBlockSize * kChunkRowBytes;  // 8 KB
  static constexpr int kTileBytes = kChunks * kChunkBytes;         // one of Q, K, V, dO
  static constexpr int kStageBytes = 4 * kTileBytes;
  static constexpr int kStages = D == 64 ? 6 : 3;                     // 192 KB of tiles either way
  static constexpr int kProbTileBytes = kBlockSize * kBlockSize * 2;  // P or dS
  static constexpr int kScratchBytes = 2 * kProbTileBytes;            // per consumer
  static constexpr int kSmemBytes =
      1024 /* alignment slack */ + kStages * kStageBytes + kConsumers * kScratchBytes + 2 * kStages * 8;
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;  // 128 x 40 + 256 x 232 <= 64K
};

template <typename T, int D>
struct BackwardSmem {
  using Cfg = BackwardConfig<T, D>;
  unsigned char* tiles;
  unsigned char* scratch;
  Barrier* full;
  Barrier* empty;

  __device__ explicit BackwardSmem(unsigned char* raw) {
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023};
    tiles = reinterpret_cast<unsigned char*>(aligned);
    scratch = tiles + Cfg::kStages * Cfg::kStageBytes;
    full = reinterpret_cast<Barrier*>(scratch + Cfg::kConsumers * Cfg::kScratchBytes);
    empty = full + Cfg::kStages;
  }
  __device__ T* q(int stage) const { return reinterpret_cast<T*>(tiles + stage * Cfg::kStageBytes); }
  __device__ T* k(int stage) const { return q(stage) + Cfg::kTileBytes / 2; }
  __device__ T* v(int stage) const { return q(stage) + Cfg::kTileBytes; }
  __device__ T* dout(int stage) const { return q(stage) + 3 * Cfg::kTileBytes / 2; }
  __device__ T* probs(int consumer) const { return reinterpret_cast<T*>(scratch + consumer * Cfg::kScratchBytes); }
  __device__ T* dscores(int consumer) const { return probs(consumer) + Cfg::kProbTileBytes / 2; }
};

using schedule::ForwardTileCoords;  // Hq == Hkv: the forward's tile order

template <typename T, int D>
__device__ __forceinline__ void backward_producer_loop(const BackwardParams& p, const BackwardSmem<T, D>& sm,
                                                       int num_tiles) {
  using Cfg = BackwardConfig<T, D>;
  int i = 0;
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x, ++i) {
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    const int stage = slot.stage;
    sm.empty[stage].wait(slot.empty_parity());
    const auto t = ForwardTileCoords::at(p.blocks, p.num_heads, 1, tile);
    Barrier& full = sm.full[stage];
    full.arrive_expect_tx(Cfg::kStageBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kChunks; ++c) {
      const int32_t at[3] = {c * static_cast<int32_t>(kChunkCols), t.q_head, t.block.row_begin};
      const int off = c * Cfg::kChunkBytes / 2;  // elements
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.q(stage) + off, &p.q_map, at, &full.word);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.k(stage) + off, &p.k_map, at, &full.word);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.v(stage) + off, &p.v_map, at, &full.word);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.dout(stage) + off, &p.dout_map, at,
                                &full.word);
    }
  }
}

// A-operand fragments of X^T for this warp's 16 key rows, k-step by k-step,
// from a 64 x 64 tile X [query][key] (ldmatrix.trans, as in the portable
// gemm_atb). All four k-steps are loaded before any wgmma reads them: a
// register must not change while an in-flight wgmma may still read it.
template <typename T>
__device__ __forceinline__ OperandA<kBlockSize> transposed_rows(const T* tile, int key0, int lane) {
  using Tile = portable::SwizzledTile<kBlockSize>;
  const uint32_t base = portable::smem_u32(tile);
  OperandA<kBlockSize> op;
#pragma unroll
  for (int kk = 0; kk < kBlockSize / 16; ++kk)
    portable::ldmatrix_x4_trans(op.a[kk],
                                Tile::addr(base, kk * 16 + (lane % 8) + (lane / 16) * 8, key0 + ((lane / 8) % 2) * 8));
  return op;
}

template <typename T, int D>
__device__ __forceinline__ void backward_consumer_loop(const BackwardParams& p, const BackwardSmem<T, D>& sm,
                                                       int num_tiles, int consumer) {
  using Cfg = BackwardConfig<T, D>;
  const uint32_t barrier_id = 1 + consumer;
  T* probs_tile = sm.probs(consumer);
  T* dscores_tile = sm.dscores(consumer);
  const float one[2] = {1.f, 1.f}, scale[2] = {p.softmax_scale, p.softmax_scale};

  int i = consumer;
  for (int tile = blockIdx.x + consumer * gridDim.x; tile < num_tiles;
       tile += Cfg::kConsumers * gridDim.x, i += Cfg::kConsumers) {
    // Re-read every tile (common/opaque.cuh): hoisted out of the loop, the
    // offsets derived from the thread's position would spill.
    const int tid = opaque(static_cast<int>(threadIdx.x)) - 128 * (1 + consumer);
    const int lane = tid % 32, row0 = 16 * (tid / 32);
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    const int stage = slot.stage;
    const auto t = ForwardTileCoords::at(p.blocks, p.num_heads, 1, tile);
    const int valid = t.block.row_count;
    T *q = sm.q(stage), *k = sm.k(stage), *v = sm.v(stage), *dout = sm.dout(stage);
    const uint32_t q_addr = portable::smem_u32(q), k_addr = portable::smem_u32(k);
    const uint32_t v_addr = portable::smem_u32(v), dout_addr = portable::smem_u32(dout);
    sm.full[stage].wait(slot.full_parity());
    if (valid < kBlockSize) {  // every product must see zeros past the block end
      zero_rows_from<T, D>(q, valid, tid);
      zero_rows_from<T, D>(k, valid, tid);
      zero_rows_from<T, D>(v, valid, tid);
      zero_rows_from<T, D>(dout, valid, tid);
      fence_async_shared();
      named_barrier_sync(barrier_id, 128);
    }

    // S = Q K^T and dP = dO V^T.
    Accumulator<kBlockSize> s, ds;
    float(&s_regs)[kBlockSize / 2] = reinterpret_cast<float(&)[kBlockSize / 2]>(s.c);
    float(&ds_regs)[kBlockSize / 2] = reinterpret_cast<float(&)[kBlockSize / 2]>(ds.c);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<T, kBlockSize>(s_regs, kmajor_desc(q_addr, kk, kBlockSize), kmajor_desc(k_addr, kk, kBlockSize), kk > 0);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<T, kBlockSize>(ds_regs, kmajor_desc(dout_addr, kk, kBlockSize), kmajor_desc(v_addr, kk, kBlockSize),
                              kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(s_regs);
    fence_registers(ds_regs);

    // P (normalized; rows past the block end zeroed) and dS, in place.
    float row_sum[2];
    portable::exp_rows_masked(s, valid, p.scale_log2, row_sum, lane);
    const float inv[2] = {row0 + lane / 4 < valid ? 1.f / row_sum[0] : 0.f,
                          row0 + lane / 4 + 8 < valid ? 1.f / row_sum[1] : 0.f};
    float dot[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < kBlockSize / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s.c[j][e] *= inv[e >> 1];
        dot[e >> 1] += s.c[j][e] * ds.c[j][e];
      }
    dot[0] = portable::quad_sum(dot[0]);
    dot[1] = portable::quad_sum(dot[1]);
#pragma unroll
    for (int j = 0; j < kBlockSize / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        ds.c[j][e] = s.c[j][e] * (ds.c[j][e] - dot[e >> 1]);
    stage_rows<T, kBlockSize>(s, one, probs_tile, row0, 0, lane);
    stage_rows<T, kBlockSize>(ds, one, dscores_tile, row0, 0, lane);
    OperandA<kBlockSize> ds_op = portable::to_operand<T>(ds);
    named_barrier_sync(barrier_id, 128);  // P and dS of all rows are in place; S and dP are done with V

    // dV = P^T dO, staged in this warp's key rows of V.
    {
      OperandA<kBlockSize> pt = transposed_rows(probs_tile, row0, lane);
      Accumulator<D> dv;
      float(&dv_regs)[D / 2] = reinterpret_cast<float(&)[D / 2]>(dv.c);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockSize / 16; ++kk)
        wgmma_rs<T, D>(dv_regs, pt.a[kk], mnmajor_desc(dout_addr, kk, kBlockSize), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(dv_regs);
#pragma unroll
      for (int kk = 0; kk < kBlockSize / 16; ++kk)
        fence_registers(pt.a[kk]);
      stage_rows<T, D>(dv, one, v, row0, 0, lane);
      __syncwarp();
      store_staged_rows<T, D>(v, row0, portable::head_rows_out<T>(p.dv, t.block, t.q_head), p.dv.token_stride, valid,
                              lane);
    }

    named_barrier_sync(barrier_id, 128);  // no warp's dV product reads dO any more: dQ is staged there

    // dQ = scale dS K, 64 columns at a time (B = one 64-column chunk of K).
#pragma unroll
    for (int c = 0; c < Cfg::kChunks; ++c) {
      Accumulator<kChunkCols> dq;
      float(&dq_regs)[kChunkCols / 2] = reinterpret_cast<float(&)[kChunkCols / 2]>(dq.c);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockSize / 16; ++kk) {
        fence_registers(ds_op.a[kk]);
        wgmma_rs<T, kChunkCols>(dq_regs, ds_op.a[kk], mnmajor_desc(k_addr + c * Cfg::kChunkBytes, kk, kBlockSize),
                                kk > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(dq_regs);
      stage_rows<T, kChunkCols>(dq, scale, dout, row0, c * kChunkCols, lane);
    }
    __syncwarp();
    store_staged_rows<T, D>(dout, row0, portable::head_rows_out<T>(p.dq, t.block, t.q_head), p.dq.token_stride, valid,
                            lane);
    named_barrier_sync(barrier_id, 128);  // no warp's dQ product reads K any more: dK is staged there

    // dK = scale dS^T Q.
    {
      OperandA<kBlockSize> dst = transposed_rows(dscores_tile, row0, lane);
      Accumulator<D> dk;
      float(&dk_regs)[D / 2] = reinterpret_cast<float(&)[D / 2]>(dk.c);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockSize / 16; ++kk)
        wgmma_rs<T, D>(dk_regs, dst.a[kk], mnmajor_desc(q_addr, kk, kBlockSize), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(dk_regs);
#pragma unroll
      for (int kk = 0; kk < kBlockSize / 16; ++kk)
        fence_registers(dst.a[kk]);
      stage_rows<T, D>(dk, scale, k, row0, 0, lane);
      __syncwarp();
      store_staged_rows<T, D>(k, row0, portable::head_rows_out<T>(p.dk, t.block, t.q_head), p.dk.token_stride, valid,
                              lane);
    }

    release_stage(sm.empty[stage], lane);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(BackwardConfig<T, D>::kThreads, 1)
    backward_kernel(const __grid_constant__ BackwardParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const BackwardSmem<T, D> sm(smem_raw);
  const int num_tiles = *p.block_count * p.num_heads;
  run_warp_specialized<BackwardConfig<T, D>>(
      sm.full, sm.empty, [&] { backward_producer_loop<T, D>(p, sm, num_tiles); },
      [&](int consumer) { backward_consumer_loop<T, D>(p, sm, num_tiles, consumer); });
#else
  __trap();  // built for another architecture; the host never launches it there
#endif
}

}  // namespace blockattn::hopper
