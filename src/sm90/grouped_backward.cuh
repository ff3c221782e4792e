// sm90 backward for grouped-query attention (Hq = G Hkv, G > 1) at 64-token
// blocks: a unit of work is one block of one KV head with the G query heads
// that read it, in one CTA, so dK and dV are summed over the group in
// registers, in a fixed head order: deterministic, no atomics
// (docs/design/sm90_grouped_backward.md has the plan and the arithmetic).
//
// Frame: tensor_ring.cuh, a unit's stream is G runs of the backward's four
// tensors in release order (V, K, dO, Q), one run per query head. K and V are
// loaded again for every head: the ring stays first-in, first-out for any G
// (each head releases its four before a later head's loads need their
// slots), and the repeats are L2 hits, the same CTA having read those rows a
// head earlier. DRAM traffic is the floor's: Q, dO, dQ per query head, K, V,
// dK, dV once per unit.
//
// Tile op: the column split of column_split_backward.cuh at 64 + 64 columns.
// Per head, both consumers compute S = Q K^T, dP = dO V^T and the softmax for
// all 64 rows (twice rather than exchanged); consumer 0 stages P in its
// 64-column chunk of the staging tile, consumer 1 dS in its own, and both read
// P^T and dS^T back. Consumer c then owns output columns [64c, 64c + 64):
//   dQ_c  = scale dS K_c     staged in the consumer's chunk, stored per head;
//   dV_c += P^T dO_c         in registers across the group,
//   dK_c += dS^T Q_c         stored after the last head (dK scaled once).
// Warp w of either consumer owns rows 16w .. + 16 (of queries and of keys), so
// every staged row is written and stored by one warp; other warps read the
// staging tile only between the two barriers that bracket the transposed
// loads of P and dS.
//
// Registers per consumer thread: dK_c + dV_c 64 across the group, S + dP 64,
// dQ_c 32, the A operands (dS rows, P^T, dS^T) 48: at most 144 live beside
// addresses, within setmaxnreg's 232.
#pragma once

#include "common/opaque.cuh"
#include "sm90/backward_products.cuh"
#include "sm90/backward_tensors.cuh"
#include "sm90/wgmma.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

template <typename T, int D>
struct GroupedBackwardConfig {
  static constexpr int kRows = 64;  // query rows = key rows of a tile, and the TMA box rows
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kConsumerThreads = 128 * kConsumers;
  using Layout = tile::Chunked<kRows, tile_chunk_cols(Operation::kBackward, D)>;  // the host's maps write this
  static constexpr int kChunkCols = Layout::kChunkColumns;
  static constexpr int kChunks = D / kChunkCols;
  static constexpr int kCols = D / kConsumers;  // output columns per consumer
  static_assert(grouped_backward_kernel(D, kRows, false) && kCols == kChunkCols,
                "one 64-column chunk per consumer: P fills consumer 0's chunk of the staging tile, dS consumer 1's");
  using ProbLayout = tile::SwizzledRows<kRows>;  // = one chunk of Layout
  static constexpr int kChunkBytes = Layout::kChunkBytes;
  static constexpr int kSlotBytes = kChunks * kChunkBytes;
  static constexpr int kScratchBytes = kSlotBytes;  // the staging tile
  // 13 slots at D = 128: three heads' tensors and one of the fourth's.
  static constexpr int kSlots = TensorRingBudget<kSlotBytes, kScratchBytes>::kSlots;
  static_assert(kSlots > kBackwardTensors, "a head's tensors and at least one of the next head's");
  static constexpr int kSmemBytes = TensorRingBudget<kSlotBytes, kScratchBytes>::kSmemBytes;
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
};

template <typename T, int D>
struct GroupedBackwardSmem {
  using Cfg = GroupedBackwardConfig<T, D>;
  using Ring = TensorRing<Cfg::kSlots, Cfg::kSlotBytes>;
  Ring ring;
  T* staging;  // Chunked<64>, D columns: consumer c's outputs in chunk c
  T* probs;    // P [query][key]: chunk 0
  T* dscores;  // dS [query][key]: chunk 1

  __device__ explicit GroupedBackwardSmem(unsigned char* raw) {
    ring.base = tile::align_shared_1024(raw);
    unsigned char* scratch = ring.base + Cfg::kSlots * Cfg::kSlotBytes;
    staging = reinterpret_cast<T*>(scratch);
    probs = staging;
    dscores = staging + Cfg::Layout::kChunkElems;
    ring.full = reinterpret_cast<Barrier*>(scratch + Cfg::kScratchBytes);
    ring.empty = ring.full + Cfg::kSlots;
  }
};

// One unit: the group's heads in order, then dK and dV. `first` is the
// unit's first tensor in the ring's stream.
template <typename T, int D, typename Hooks, typename Ring>
__device__ __forceinline__ void grouped_backward_unit(const Params& p, const Hooks& hooks,
                                                      const GroupedBackwardSmem<T, D>& sm, const tile::TileCoords& unit,
                                                      const Ring& ring, int first, int consumer) {
  using Cfg = GroupedBackwardConfig<T, D>;
  using Layout = typename Cfg::Layout;
  using ProbLayout = typename Cfg::ProbLayout;
  constexpr int kRows = Cfg::kRows, kCols = Cfg::kCols;
  const tile::RowScale one = tile::RowScale::uniform(1.f), scale = tile::RowScale::uniform(p.attn.softmax_scale);
  // Re-read every unit (common/opaque.cuh): hoisted out of the loop, the
  // offsets derived from the thread's position would spill.
  const int consumer_tid = opaque_thread_index<Cfg::kConsumers * 128>(128);  // over both consumers
  const int lane = consumer_tid % 32;
  const int row0 = consumer_tid % 128 / 32 * 16;  // the warp's query rows and key rows
  const int valid = unit.block.row_count;
  const int col0 = consumer * kCols;
  const uint32_t own_chunk = consumer * Cfg::kChunkBytes;  // this consumer's columns in a slot
  T* const staging = sm.staging + consumer * Layout::kChunkElems;
  // An output's way out: staged in the warp's rows of the consumer's chunk,
  // stored, and (every lane's reads of the staging done) free for the next
  // writes there: P or dS of the next head, the next output.
  auto write = [&](const tile::Accumulator<kCols>& acc, const tile::RowScale& factor, const TensorView& out,
                   int head) BLOCKATTN_INLINE {
    tile::write_rows<Layout, T, kCols, kCols, kRowWalk>(acc, factor, staging, row0,
                                                        tile::head_rows_out<T>(out, unit.block, head) + col0,
                                                        out.token_stride, valid, lane);
    __syncwarp();
  };

  tile::Accumulator<kCols> dk, dv;  // this consumer's columns, summed over the group
#pragma unroll 1
  for (int g = 0; g < p.attn.group_size; ++g) {
    const TileTensors<Ring> in{ring, first + kBackwardTensors * g};
    tile::TileCoords t = unit;
    t.q_head = unit.q_head + g;
    const uint32_t q_addr = tile::smem_u32(in.template data<T>(kTensorQ));
    const uint32_t k_addr = tile::smem_u32(in.template data<T>(kTensorK));
    const uint32_t v_addr = tile::smem_u32(in.template data<T>(kTensorV));
    const uint32_t dout_addr = tile::smem_u32(in.template data<T>(kTensorDout));
    begin_backward_tile<Layout, kRows, D, Cfg::kConsumerThreads, T>(hooks, t, in, consumer_tid);

    // S = Q K^T and dP = dO V^T over all 64 rows, in both consumers.
    tile::Accumulator<kRows> s, ds;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<T, kRows>(s.regs(), kmajor_desc<Layout>(q_addr, kk), kmajor_desc<Layout>(k_addr, kk), kk > 0);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<T, kRows>(ds.regs(), kmajor_desc<Layout>(dout_addr, kk), kmajor_desc<Layout>(v_addr, kk), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(s.regs());
    fence_registers(ds.regs());
    in.release(kTensorV, lane);

    float row_sum[2];
    tile::exp_rows_in_tile(s, t.block, row0, p.attn.scale_log2, row_sum, lane);
    tile::softmax_grad_rows(s, ds, tile::inverse_valid_rows(row_sum, row0, valid, lane));
    // The warp's rows of its consumer's chunk: the last thing there was the
    // warp's own previous output, stored (write()'s __syncwarp).
    if (consumer == 0)
      tile::stage_rows<ProbLayout, T>(s, one, sm.probs, row0, 0, lane);
    else
      tile::stage_rows<ProbLayout, T>(ds, one, sm.dscores, row0, 0, lane);
    tile::OperandA<kRows> ds_rows = tile::to_operand<T>(ds);
    named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);  // P and dS of all rows are in place
    tile::OperandA<kRows> p_keys = transposed_rows<T, kRows, kRows, ProbLayout>(sm.probs, row0, lane);
    tile::OperandA<kRows> ds_keys = transposed_rows<T, kRows, kRows, ProbLayout>(sm.dscores, row0, lane);
    // Every warp holds its P^T and dS^T rows: the staging tile is free.
    named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);

    // dQ_c = dS K_c, dV_c += P^T dO_c, dK_c += dS^T Q_c: issued together,
    // waited for once.
    tile::Accumulator<kCols> dq;
    wgmma_fence();
    issue_rs_product<T, kCols, Layout>(dq, ds_rows, k_addr + own_chunk, false);
    issue_rs_product<T, kCols, Layout>(dv, p_keys, dout_addr + own_chunk, g > 0);
    issue_rs_product<T, kCols, Layout>(dk, ds_keys, q_addr + own_chunk, g > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_rs_product(dq, ds_rows);
    fence_rs_product(dv, p_keys);
    fence_rs_product(dk, ds_keys);
    in.release(kTensorK, lane);
    in.release(kTensorDout, lane);
    in.release(kTensorQ, lane);
    write(dq, scale, p.dq, t.q_head);
  }
  write(dv, one, p.dv, unit.kv_head);
  write(dk, scale, p.dk, unit.kv_head);
}

template <typename T, int D, core::Fusion F>
__global__ void __launch_bounds__(GroupedBackwardConfig<T, D>::kThreads, 1)
    grouped_backward_kernel(const __grid_constant__ Params p) {
  static_assert(F == core::Fusion::kNone, "rotary's transpose rotation needs whole rows: grouped_backward_kernel()");
  using Cfg = GroupedBackwardConfig<T, D>;
  extern __shared__ unsigned char smem_raw[];
  const GroupedBackwardSmem<T, D> sm(smem_raw);
  const tile::Hooks<F> hooks(p.attn);
  const int num_kv_heads = p.attn.num_q_heads / p.attn.group_size;
  run_tensor_ring<Cfg>(
      sm.ring, p.attn.schedule.block_count() * num_kv_heads, kBackwardTensors * p.attn.group_size,
      [&](int unit) { return tile::TileCoords::per_kv_head(p.attn, num_kv_heads, unit); },
      [&](const tile::TileCoords& unit, int n, unsigned char* slot, Barrier& full) {
        tile::TileCoords t = unit;
        t.q_head = unit.q_head + n / kBackwardTensors;
        load_backward_tensor<typename Cfg::Layout, Cfg::kChunks>(p, t, n % kBackwardTensors, slot, full);
      },
      [&](const tile::TileCoords& unit, const auto& tensors, int consumer) BLOCKATTN_INLINE {
        grouped_backward_unit<T, D>(p, hooks, sm, unit, tensors.ring, tensors.first, consumer);
      });
}

}  // namespace blockattn::sm90
