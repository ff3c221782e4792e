// sm90 dense forward kernel (include/blockattn/dense.h): persistent,
// warp-specialized, TMA + wgmma, a FlashAttention-style loop over key tiles.
//
//   schedule: tile/dense_schedule.cuh hands each CTA every gridDim.x-th work
//             item, a pair of query blocks of one (batch, head) with equal
//             causal cost; a unit is 64 query rows per consumer warpgroup;
//   producer: one thread loads the unit's Q once, then streams its K and V
//             tiles through a ring of kStages stages (K and V on separate
//             barriers, so S = Q K^T starts before V has landed);
//   consumers: two warpgroups (three at D = 64) of 64 query rows each read
//             every stage, taking turns to issue their products (sync.cuh's TakeTurns):
//             S = Q K^T (wgmma, both operands in shared memory), masking on
//             the tiles that cross the causal diagonal or the sequence end
//             only, online softmax in fp32 registers (tile/online_softmax.cuh),
//             O = O * rescale + P V (wgmma, P from registers as the A operand,
//             V transposed from shared memory), and finally normalization and
//             the output's stores straight from registers. Inside a
//             warpgroup the products are pipelined: S of tile n is issued
//             before P V of tile n - 1, whose tensor-core time hides the
//             softmax of tile n. K and V have their own release barriers, so
//             a K buffer refills as soon as its S is done.
// The workload is compute-bound; docs/perf.md ("Dense forward") has the
// floors and the measured steps.
#pragma once

#include <algorithm>
#include <type_traits>

#include "common/kernel_launcher.cuh"
#include "sm90/frame.cuh"
#include "sm90/loader.cuh"
#include "sm90/params.h"
#include "sm90/wgmma.cuh"
#include "tile/dense_schedule.cuh"
#include "tile/online_softmax.cuh"
#include "tile/row_io.cuh"

namespace blockattn::sm90 {

template <typename T, int D>
struct DenseForwardConfig {
  static constexpr int kConsumers = dense_consumers(D);
  static constexpr int kRows = dense_rows_per_unit(D);      // query rows of a unit
  static constexpr int kConsumerRows = kRows / kConsumers;  // one m64 wgmma row block
  static_assert(kConsumerRows == 64, "each consumer warpgroup owns one m64 row block");
  static constexpr int kKeys = dense_keys_per_tile(D);
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kChunks = D / tile::kChunkCols;
  static constexpr int kQChunkBytes = tile::Chunked<kRows>::kChunkBytes;
  static constexpr int kKvChunkBytes = tile::Chunked<kKeys>::kChunkBytes;
  static constexpr int kQBytes = kChunks * kQChunkBytes;
  static constexpr int kKvTileBytes = kChunks * kKvChunkBytes;  // one of K, V
  static constexpr int kStageBytes = 2 * kKvTileBytes;
  // As many stages as fit beside Q, up to 4: 4 at D = 64, 3 at 128, 2 at 256.
  static constexpr int kBarrierBytes = 8 * (2 + 4 * 4);
  static constexpr int kStages = std::min(4, (227 * 1024 - 1024 - kBarrierBytes - kQBytes) / kStageBytes);
  static_assert(kStages >= 2, "double buffering at least");
  static constexpr int kBarriers = 2 + 4 * kStages;
  static constexpr int kSmemBytes = 1024 /* alignment slack */ + kQBytes + kStages * kStageBytes + kBarriers * 8;
  // 128 x 24 + kConsumers x 128 x kConsumerRegs <= 64K registers: the
  // producer is one thread of loop counters; at D = 256 two consumers need
  // every register for O (128), S, P and the softmax state; at D = 64 three
  // fit in 160 each.
  static constexpr uint32_t kProducerRegs = 24, kConsumerRegs = kConsumers == 3 ? 160 : 240;
};

// Shared memory: Q, the K/V stages (all 1024-byte aligned), then the barriers.
template <typename T, int D>
struct DenseForwardSmem {
  using Cfg = DenseForwardConfig<T, D>;
  unsigned char* tiles;
  Barrier* q_full;   // producer -> consumers: the unit's Q has landed
  Barrier* q_empty;  // consumers -> producer: both are past their last S of the unit
  Barrier* k_full;   // [kStages] the stage's K has landed
  Barrier* v_full;   // [kStages] the stage's V has landed
  Barrier* k_empty;  // [kStages] both consumers are past S of the stage's K
  Barrier* v_empty;  // [kStages] both consumers are past P V of the stage's V

  __device__ explicit DenseForwardSmem(unsigned char* raw) {
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023};
    tiles = reinterpret_cast<unsigned char*>(aligned);
    q_full = reinterpret_cast<Barrier*>(tiles + Cfg::kQBytes + Cfg::kStages * Cfg::kStageBytes);
    q_empty = q_full + 1;
    k_full = q_full + 2;
    v_full = k_full + Cfg::kStages;
    k_empty = v_full + Cfg::kStages;
    v_empty = k_empty + Cfg::kStages;
  }
  __device__ unsigned char* q() const { return tiles; }
  __device__ unsigned char* k(int stage) const { return tiles + Cfg::kQBytes + stage * Cfg::kStageBytes; }
  __device__ unsigned char* v(int stage) const { return k(stage) + Cfg::kKvTileBytes; }

  // Every barrier is released by one arrival per consumer warp, except the
  // producer's transaction barriers.
  __device__ void init() const {
    q_full->init(1);
    q_empty->init(4 * Cfg::kConsumers);
    for (int s = 0; s < Cfg::kStages; ++s) {
      k_full[s].init(1);
      v_full[s].init(1);
      k_empty[s].init(4 * Cfg::kConsumers);
      v_empty[s].init(4 * Cfg::kConsumers);
    }
    fence_barrier_init();
  }
};

template <typename T, int D, bool kCausal>
__device__ __forceinline__ void dense_produce(const DenseParams& p, const DenseForwardSmem<T, D>& sm) {
  using Cfg = DenseForwardConfig<T, D>;
  int item = 0, unit_i = 0;
  tile::for_each_dense_unit<kCausal>(p.attn, Cfg::kRows, [&](const tile::DenseUnit& u) {
    const auto tiles = tile::KeyTiles<Cfg::kKeys>::of(p.attn, u.row0, Cfg::kRows);
    sm.q_empty->wait(RingSlot<1>::of(unit_i).empty_parity());
    sm.q_full->arrive_expect_tx(Cfg::kQBytes);  // rows past S are zero-filled but still counted
    load_dense_tile<Cfg::kChunks, Cfg::kQChunkBytes>(&p.q_map, sm.q(), u.row0, u.q_head, u.batch, *sm.q_full);
    for (int n = 0; n < tiles.count; ++n, ++item) {
      const auto slot = RingSlot<Cfg::kStages>::of(item);
      const int key0 = n * Cfg::kKeys;
      sm.k_empty[slot.stage].wait(slot.empty_parity());
      sm.k_full[slot.stage].arrive_expect_tx(Cfg::kKvTileBytes);
      load_dense_tile<Cfg::kChunks, Cfg::kKvChunkBytes>(&p.k_map, sm.k(slot.stage), key0, u.kv_head, u.batch,
                                                        sm.k_full[slot.stage]);
      sm.v_empty[slot.stage].wait(slot.empty_parity());
      sm.v_full[slot.stage].arrive_expect_tx(Cfg::kKvTileBytes);
      load_dense_tile<Cfg::kChunks, Cfg::kKvChunkBytes>(&p.v_map, sm.v(slot.stage), key0, u.kv_head, u.batch,
                                                        sm.v_full[slot.stage]);
    }
    ++unit_i;
  });
}

// Issues S = Q K^T for the consumer's 64 rows against one K tile, as one
// wgmma group (the caller waits).
template <typename T, int D>
__device__ __forceinline__ void issue_scores(tile::Accumulator<DenseForwardConfig<T, D>::kKeys>& s, uint32_t q_addr,
                                             uint32_t k_addr) {
  using Cfg = DenseForwardConfig<T, D>;
  // Q's descriptors are the same for every tile. q_addr is warp-uniform
  // (split_roles' warpgroup index is), so the compiler may hoist them into
  // uniform registers, which the consumers' vector registers do not pay for.
  // (Hidden behind opaque() they were rebuilt in vector registers every
  // tile: 9% of the D = 64 forward; docs/perf.md, "Session 44".)
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmma_ss<T, Cfg::kKeys>(s.regs(), kmajor_desc<tile::Chunked<Cfg::kRows>>(q_addr, kk),
                            kmajor_desc<tile::Chunked<Cfg::kKeys>>(k_addr, kk), kk > 0);
  wgmma_commit();
}

// Issues O += P V for one V tile (P from registers, V the MN-major B
// operand), as one wgmma group (the caller waits).
template <typename T, int D>
__device__ __forceinline__ void issue_accumulate(tile::Accumulator<D>& o,
                                                 tile::OperandA<DenseForwardConfig<T, D>::kKeys>& probs,
                                                 uint32_t v_addr) {
  using Cfg = DenseForwardConfig<T, D>;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kKeys / 16; ++kk) {
    fence_registers(probs.a[kk]);
    wgmma_rs<T, D>(o.regs(), probs.a[kk], mnmajor_desc<tile::Chunked<Cfg::kKeys>>(v_addr, kk), 1);
  }
  wgmma_commit();
}

template <typename T, int D, bool kCausal>
__device__ __forceinline__ void dense_consume(const DenseParams& p, const DenseForwardSmem<T, D>& sm, int consumer) {
  using Cfg = DenseForwardConfig<T, D>;
  const int tid = threadIdx.x % 128;  // unsigned, masked: shifts, not signed division
  const int lane = tid % 32, row0 = Cfg::kConsumerRows * consumer + 16 * (tid / 32);  // the warp's rows in the unit
  // The consumer's 64 rows of Q: one chunk row block further into each chunk.
  const uint32_t q_addr = tile::smem_u32(sm.q()) + Cfg::kConsumerRows * consumer * tile::kChunkRowBytes;
  const TakeTurns<Cfg::kConsumers> turns{consumer};
  turns.start();
  int item = 0, unit_i = 0;
  tile::for_each_dense_unit<kCausal>(p.attn, Cfg::kRows, [&](const tile::DenseUnit& u) BLOCKATTN_INLINE {
    const auto tiles = tile::KeyTiles<Cfg::kKeys>::of(p.attn, u.row0, Cfg::kRows);  // what the producer loads
    const auto mine = tile::KeyTiles<Cfg::kKeys>::of(p.attn, u.row0 + Cfg::kConsumerRows * consumer,
                                                     Cfg::kConsumerRows);  // what this warpgroup's rows see
    int limit[2];
    tile::key_limits(u.row0 + row0, p.attn.seq_len, kCausal, lane, limit);
    tile::OnlineSoftmax softmax;
    softmax.init();
    tile::Accumulator<D> o;
    o.zero();
    tile::Accumulator<Cfg::kKeys> s;
    tile::OperandA<Cfg::kKeys> probs;
    sm.q_full->wait(RingSlot<1>::of(unit_i).full_parity());
    // The tiles' stage waits and releases. Every phase of every stage is
    // waited for, also where this warpgroup's rows see none of a tile: a
    // skipped phase would let a later parity wait on the same stage succeed
    // before its data lands.
    auto slot_of = [&](int n) { return RingSlot<Cfg::kStages>::of(item + n); };
    auto scores_done = [&](int n) {  // S of tile n has completed: its K, and after the last one Q, are free
      release_stage(sm.k_empty[slot_of(n).stage], lane);
      if (n + 1 == mine.count) release_stage(*sm.q_empty, lane);
    };
    // s (tile n's scores) -> P in s; returns the rescale of earlier output.
    // `masked` is a type: the tiles without a mask run code without it.
    auto softmax_of = [&](int n, auto masked) {
      if constexpr (decltype(masked)::value) tile::mask_key_columns(s, n * Cfg::kKeys, limit, lane);
      return softmax.update(s, p.attn.scale_log2);
    };

    if (mine.count == 0) {  // no rows here: Q is free at once, and the turn of tile 0's S passes
      release_stage(*sm.q_empty, lane);
      turns.wait_turn();
      turns.pass_turn();
    } else {
      // Tile 0: S, softmax.
      sm.k_full[slot_of(0).stage].wait(slot_of(0).full_parity());
      turns.wait_turn();
      issue_scores<T, D>(s, q_addr, tile::smem_u32(sm.k(slot_of(0).stage)));
      turns.pass_turn();
      wgmma_wait<0>();
      fence_registers(s.regs());
      scores_done(0);
      if (mine.first_masked == 0)  // nothing accumulated yet: no rescale
        softmax_of(0, std::true_type{});
      else
        softmax_of(0, std::false_type{});
      probs = tile::to_operand<T>(s);
      // Tiles 1..: S of tile n is issued, then P V of tile n - 1 behind it; the
      // softmax of tile n runs while that product is on the tensor cores.
      auto step = [&](int n, auto masked) BLOCKATTN_INLINE {
        const auto slot = slot_of(n), prev = slot_of(n - 1);
        sm.k_full[slot.stage].wait(slot.full_parity());
        sm.v_full[prev.stage].wait(prev.full_parity());
        turns.wait_turn();
        issue_scores<T, D>(s, q_addr, tile::smem_u32(sm.k(slot.stage)));
        issue_accumulate<T, D>(o, probs, tile::smem_u32(sm.v(prev.stage)));
        turns.pass_turn();
        wgmma_wait<1>();  // S done; P V may still run
        fence_registers(s.regs());
        scores_done(n);
        const tile::RowScale rescale = softmax_of(n, masked);
        wgmma_wait<0>();  // P V done: o and probs are free
        fence_registers(o.regs());
        release_stage(sm.v_empty[prev.stage], lane);
        tile::scale_rows(o, rescale);
        probs = tile::to_operand<T>(s);
      };
      const int clear_end = min(mine.first_masked, mine.count);  // tiles [1, clear_end) need no mask
      for (int n = 1; n < clear_end; ++n)
        step(n, std::false_type{});
      for (int n = max(clear_end, 1); n < mine.count; ++n)
        step(n, std::true_type{});
      {  // P V of the last tile.
        const auto last = slot_of(mine.count - 1);
        sm.v_full[last.stage].wait(last.full_parity());
        turns.wait_turn();
        issue_accumulate<T, D>(o, probs, tile::smem_u32(sm.v(last.stage)));
        turns.pass_turn();
        wgmma_wait<0>();
        fence_registers(o.regs());
        release_stage(sm.v_empty[last.stage], lane);
      }
    }
    // Tiles the producer loaded for the other warpgroups' rows only.
    for (int n = mine.count; n < tiles.count; ++n) {
      const auto slot = slot_of(n);
      sm.k_full[slot.stage].wait(slot.full_parity());
      release_stage(sm.k_empty[slot.stage], lane);
      sm.v_full[slot.stage].wait(slot.full_parity());
      release_stage(sm.v_empty[slot.stage], lane);
      turns.wait_turn();  // the round the others run for this tile
      turns.pass_turn();
    }
    item += tiles.count;
    ++unit_i;
    if (mine.count == 0) return;
    float lse[2];
    const tile::RowScale inverse = softmax.finish(p.attn.scale_log2, lse);
    tile::store_rows_direct(o, inverse, tile::unit_rows<T>(p.out, u, u.q_head), p.out.seq_stride, row0,
                            p.attn.seq_len - u.row0, lane);
    tile::write_lse(p.attn, u, row0, lse, lane);
  });
  turns.finish();
}

template <typename T, int D, bool kCausal>
__global__ void __launch_bounds__(DenseForwardConfig<T, D>::kThreads, 1)
    dense_forward_kernel(const __grid_constant__ DenseParams p) {
  using Cfg = DenseForwardConfig<T, D>;
  extern __shared__ unsigned char smem_raw[];
  const DenseForwardSmem<T, D> sm(smem_raw);
  if (threadIdx.x == 0) sm.init();
  __syncthreads();
  split_roles<Cfg>([&]() BLOCKATTN_INLINE { dense_produce<T, D, kCausal>(p, sm); },
                   [&](int consumer) BLOCKATTN_INLINE { dense_consume<T, D, kCausal>(p, sm, consumer); });
}

}  // namespace blockattn::sm90

BLOCKATTN_DENSE_KERNEL_OF(sm90, dense_forward_kernel, DenseForwardConfig)
