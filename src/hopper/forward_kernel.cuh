// sm_90a forward kernel: persistent, warp-specialized, TMA + wgmma.
//
// One CTA per SM, three warpgroups:
//   producer  (warpgroup 0, one thread): walks the CTA's tiles and TMA-loads
//             {Q, K, V} of each into a ring of kStages shared-memory stages,
//             several tiles ahead of the consumers;
//   consumers (warpgroups 1, 2): take alternate tiles. Per tile: S = Q K^T
//             (wgmma, both operands in shared memory), exact softmax in fp32
//             registers, O = P V (wgmma, P from registers, V transposed from
//             shared memory), normalization, then O is staged in the tile's
//             own Q buffer and leaves with 16-byte stores that skip rows past
//             the block end. The stage is then handed back to the producer.
// The workload is memory-bound (32 FLOP/byte): all the design is about keeping
// kStages tiles of loads in flight per SM from the first tile to the last.
#pragma once

#include "hopper/params.h"
#include "hopper/sync.cuh"
#include "hopper/tile_io.cuh"
#include "hopper/wgmma.cuh"
#include "portable/block_rows.cuh"
#include "portable/softmax.cuh"
#include "schedule/tile_coords.cuh"

namespace blockattn::hopper {

using portable::Accumulator;
using portable::OperandA;

template <typename T, int D>
struct ForwardConfig {
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kChunks = D / kChunkCols;                   // 64-column chunks per row
  static constexpr int kChunkBytes = kBlockSize * kChunkRowBytes;  // 8 KB
  static constexpr int kTileBytes = kChunks * kChunkBytes;         // one of Q, K, V
  static constexpr int kStageBytes = 3 * kTileBytes;
  static constexpr int kStages = D == 64 ? 8 : 4;  // 192 KB of tiles either way
  static_assert(kStages % kConsumers == 0, "each consumer owns fixed stages");
  static constexpr int kSmemBytes = 1024 /* alignment slack */ + kStages * kStageBytes + 2 * kStages * 8;
  // 128 x 40 + 256 x 232 <= 64K registers. The producer needs ~40 for its
  // TMA coordinates without spilling.
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
};

// Shared memory: 1024-byte aligned stages (Q, K, V tiles), then the barriers.
template <typename T, int D>
struct ForwardSmem {
  using Cfg = ForwardConfig<T, D>;
  unsigned char* tiles;
  Barrier* full;   // producer -> consumer: the stage's bytes have landed
  Barrier* empty;  // consumer -> producer: the stage may be refilled

  __device__ explicit ForwardSmem(unsigned char* raw) {
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023};
    tiles = reinterpret_cast<unsigned char*>(aligned);
    full = reinterpret_cast<Barrier*>(tiles + Cfg::kStages * Cfg::kStageBytes);
    empty = full + Cfg::kStages;
  }
  __device__ unsigned char* q(int stage) const { return tiles + stage * Cfg::kStageBytes; }
  __device__ unsigned char* k(int stage) const { return q(stage) + Cfg::kTileBytes; }
  __device__ unsigned char* v(int stage) const { return q(stage) + 2 * Cfg::kTileBytes; }
};

using schedule::ForwardTileCoords;

template <typename T, int D>
__device__ __forceinline__ void producer_loop(const ForwardParams& p, const ForwardSmem<T, D>& sm, int num_tiles) {
  using Cfg = ForwardConfig<T, D>;
  int i = 0;
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x, ++i) {
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    const int stage = slot.stage;
    sm.empty[stage].wait(slot.empty_parity());
    const auto t = ForwardTileCoords::at(p.blocks, p.num_q_heads, p.group_size, tile);
    Barrier& full = sm.full[stage];
    full.arrive_expect_tx(Cfg::kStageBytes);  // rows past T are zero-filled but still counted
#pragma unroll
    for (int c = 0; c < Cfg::kChunks; ++c) {
      const int32_t col = c * kChunkCols, off = c * Cfg::kChunkBytes;
      const int32_t q_at[3] = {col, t.q_head, t.block.row_begin};
      const int32_t kv_at[3] = {col, t.kv_head, t.block.row_begin};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.q(stage) + off, &p.q_map, q_at, &full.word);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.k(stage) + off, &p.k_map, kv_at, &full.word);
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, sm.v(stage) + off, &p.v_map, kv_at, &full.word);
    }
  }
}

template <typename T, int D>
__device__ __forceinline__ void consumer_loop(const ForwardParams& p, const ForwardSmem<T, D>& sm, int num_tiles,
                                              int consumer) {
  using Cfg = ForwardConfig<T, D>;
  const int tid = threadIdx.x - 128 * (1 + consumer);
  const int lane = tid % 32, row0 = 16 * (tid / 32);

  int i = consumer;
  for (int tile = blockIdx.x + consumer * gridDim.x; tile < num_tiles;
       tile += Cfg::kConsumers * gridDim.x, i += Cfg::kConsumers) {
    const auto slot = RingSlot<Cfg::kStages>::of(i);
    const int stage = slot.stage;
    const auto t = ForwardTileCoords::at(p.blocks, p.num_q_heads, p.group_size, tile);
    const int valid = t.block.row_count;
    T* q_tile = reinterpret_cast<T*>(sm.q(stage));
    T* v_tile = reinterpret_cast<T*>(sm.v(stage));
    sm.full[stage].wait(slot.full_parity());
    if (valid < kBlockSize) {  // Q and K tails only feed rows and columns that are discarded or masked
      zero_rows_from<T, D>(v_tile, valid, tid);
      fence_async_shared();  // generic writes, read next by wgmma (async proxy)
      named_barrier_sync(1 + consumer, 128);
    }

    // S = Q K^T over D / 16 steps.
    const uint32_t q_addr = portable::smem_u32(q_tile), k_addr = portable::smem_u32(sm.k(stage));
    Accumulator<kBlockSize> s;
    float(&s_regs)[kBlockSize / 2] = reinterpret_cast<float(&)[kBlockSize / 2]>(s.c);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<T, kBlockSize>(s_regs, kmajor_desc(q_addr, kk, kBlockSize), kmajor_desc(k_addr, kk, kBlockSize), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(s_regs);

    float row_sum[2];
    portable::exp_rows_masked(s, valid, p.scale_log2, row_sum, lane);
    OperandA<kBlockSize> probs = portable::to_operand<T>(s);

    // O = P V over the 64 keys; V is the transposed (MN-major) B operand.
    const uint32_t v_addr = portable::smem_u32(v_tile);
    Accumulator<D> o;
    float(&o_regs)[D / 2] = reinterpret_cast<float(&)[D / 2]>(o.c);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockSize / 16; ++kk) {
      fence_registers(probs.a[kk]);
      wgmma_rs<T, D>(o_regs, probs.a[kk], mnmajor_desc(v_addr, kk, kBlockSize), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(o_regs);

    // Normalize and stage O in this warp's rows of the Q buffer, once every
    // warp of the group is past S (the wgmma read all of Q), then store the
    // rows that belong to the block.
    named_barrier_sync(1 + consumer, 128);
    const float inv[2] = {1.f / row_sum[0], 1.f / row_sum[1]};
    stage_rows<T, D>(o, inv, q_tile, row0, 0, lane);
    __syncwarp();
    store_staged_rows<T, D>(q_tile, row0, portable::head_rows_out<T>(p.out, t.block, t.q_head), p.out.token_stride,
                            valid, lane);
    release_stage(sm.empty[stage], lane);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(ForwardConfig<T, D>::kThreads, 1)
    forward_kernel(const __grid_constant__ ForwardParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const ForwardSmem<T, D> sm(smem_raw);
  const int num_tiles = *p.block_count * p.num_q_heads;
  run_warp_specialized<ForwardConfig<T, D>>(
      sm.full, sm.empty, [&] { producer_loop<T, D>(p, sm, num_tiles); },
      [&](int consumer) { consumer_loop<T, D>(p, sm, num_tiles, consumer); });
#else
  __trap();  // built for another architecture; the host never launches it there
#endif
}

}  // namespace blockattn::hopper
