// sm90 backward for wide heads (any D from 160 to 256; the kernel table
// builds it at 224 and 256, where it measured fastest: docs/perf.md) at
// 64-token blocks: both consumer warpgroups share each tile, split by output
// columns, in tensor_ring.cuh's frame.
//
// Here a tile's Q, K, V, dO are 24-32 KB each: frame.cuh's whole-tile stages
// fit twice at most (at D = 224 and 256 once, hence the portable kernel's
// load-then-compute rhythm there, 47-57% of copy). Streamed one tensor per
// slot, 6-8 slots hold a tile and half to all of the next one. The products
// are cheap next to the bytes (~2 us of wgmma per ~10 us of memory per SM at
// D = 256), so the split favours short code over work saved:
//   both consumers:  S = Q K^T, dP = dO V^T and the softmax, for all 64 rows
//                    (computed twice rather than exchanged through shared
//                    memory); consumer 0 stages P, consumer 1 stages dS;
//   consumer 0:      columns [0, 128) of dQ = scale dS K, dV = P^T dO and
//                    dK = scale dS^T Q (m64n128 each, from the same A
//                    operands); consumer 1 the rest (96 or 128 columns);
//                    each output staged, then stored through TMA
//                    (tma_store.cuh: D = 224's rows start 64 bytes into a
//                    128-byte line every other head, which 16-byte stores
//                    paid for with 57% of the kernel's time);
//   with rotary:     whole outputs instead (the transpose rotation pairs
//                    column j with j + r/2): consumer 0 dQ and dV, consumer
//                    1 dK, stored from registers.
// Warp w of either consumer owns rows 16w .. + 16 (of queries and of keys).
//
// Shared scratch is one 64-row staging tile (Cfg::Layout): each consumer
// stages its output columns in its own chunks, P sits at the start of
// consumer 0's (columns [0, 64)), dS at the start of consumer 1's (columns
// [128, 192)), each laid out like the outputs' chunks (Cfg::ProbLayout), so
// every warp writes only rows it owns in its own consumer's chunks; other
// warps read them only between the two barriers that bracket the transposed
// loads of P and dS. At D = 224 the chunks are 32 columns (exact boxes;
// tile_chunk_cols in params.h), and P and dS two such chunks each.
#pragma once

#include <type_traits>

#include "common/opaque.cuh"
#include "sm90/backward_products.cuh"
#include "sm90/backward_tensors.cuh"
#include "sm90/stage_matrix.cuh"
#include "sm90/tma_store.cuh"
#include "sm90/wgmma.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

template <typename T, int D>
struct ColumnSplitBackwardConfig {
  static_assert(D > 128 && D <= 256, "128 columns for consumer 0, the rest (32 to 128) for consumer 1");
  static constexpr int kHeadDim = D;
  static constexpr int kRows = 64;  // query rows = key rows of a tile, and the TMA box rows
  static constexpr int kConsumers = 2;
  // Both consumers work on every tile, so the CTA takes two neighbouring
  // heads' tiles in a row: their row pieces are neighbours in memory
  // (headdim-d224-h2: one token's two heads are one 896-byte row). The
  // D = 224 backward 81 -> 87% of copy (docs/perf.md, "Neighbouring tiles
  // on the tensor ring").
  static constexpr int kNeighbourTiles = 2;
  // Outputs through TMA stores (tma_store.cuh), from maps the host encodes:
  // the stores were 57% of this kernel's time at headdim-d224-h2, whose
  // 448-byte head rows start 64 bytes into a 128-byte line every other head
  // (docs/perf.md, "The D = 224 backward's stores").
  static constexpr bool kStoresByTma = true;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kWaitsForPriorGrids = true;  // column_split_backward_kernel()'s first step
  static constexpr int kConsumerThreads = 128 * kConsumers;
  using Layout = tile::Chunked<kRows, tile_chunk_cols(Operation::kBackward, D)>;  // the host's maps write this
  static constexpr int kChunkCols = Layout::kChunkColumns;
  static constexpr int kChunks = (D + kChunkCols - 1) / kChunkCols;
  static constexpr int kPaddedD = kChunks * kChunkCols;
  // P and dS in the staging tile: rows of the output chunks' width, so that a
  // warp's 16 rows of P or dS cover the bytes of its own 16 rows of output
  // staging (64-byte chunk rows hold half of a 128-byte P row: with P in
  // 128-byte rows, warp 0's P rows would cover warp 1's staged dK of the
  // previous tile while warp 1 may still be storing it).
  using ProbLayout =
      std::conditional_t<kChunkCols == tile::kChunkCols, tile::SwizzledRows<kRows>, tile::Chunked<kRows, kChunkCols>>;
  // Output columns [kFirstCols c, ...) go to consumer c: 128 (an m64n128
  // product) to consumer 0, the other 96 or 128 to consumer 1.
  static constexpr int kFirstCols = 128;
  static_assert(kFirstCols + kRows <= kPaddedD, "dS fits in consumer 1's staging columns");
  static constexpr int kChunkBytes = Layout::kChunkBytes;
  static constexpr int kTensors = kBackwardTensors;
  static constexpr int kSlotBytes = kChunks * kChunkBytes;
  static constexpr int kScratchBytes = kSlotBytes;  // the staging tile
  // 8 slots at D = 160 and 192, 7 at 224 (exact chunks), 6 at 256.
  static constexpr int kSlots = TensorRingBudget<kSlotBytes, kScratchBytes>::kSlots;
  static_assert(kSlots > kTensors, "a tile's tensors and at least one of the next tile's");
  static constexpr int kSmemBytes = TensorRingBudget<kSlotBytes, kScratchBytes>::kSmemBytes;
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
};

template <typename T, int D>
struct ColumnSplitBackwardSmem {
  using Cfg = ColumnSplitBackwardConfig<T, D>;
  using Ring = TensorRing<Cfg::kSlots, Cfg::kSlotBytes>;
  Ring ring;
  T* staging;  // Chunked<64>, kPaddedD columns
  T* probs;    // P [query][key]: columns [0, 64) of the staging tile (consumer 0's)
  T* dscores;  // dS [query][key]: columns [128, 192) (consumer 1's)

  __device__ explicit ColumnSplitBackwardSmem(unsigned char* raw) {
    ring.base = tile::align_shared_1024(raw);
    unsigned char* scratch = ring.base + Cfg::kSlots * Cfg::kSlotBytes;
    staging = reinterpret_cast<T*>(scratch);
    probs = staging;
    dscores = staging + Cfg::kFirstCols / Cfg::kChunkCols * Cfg::Layout::kChunkElems;
    ring.full = reinterpret_cast<Barrier*>(scratch + Cfg::kScratchBytes);
    ring.empty = ring.full + Cfg::kSlots;
  }
};

template <int kN>
using Cols = std::integral_constant<int, kN>;

template <typename T, int D, typename Hooks, typename Tensors>
__device__ __forceinline__ void column_split_backward_tile(const Params& p, const Hooks& hooks,
                                                           const ColumnSplitBackwardSmem<T, D>& sm,
                                                           const tile::TileCoords& t, const Tensors& in, int consumer) {
  using Cfg = ColumnSplitBackwardConfig<T, D>;
  using Layout = typename Cfg::Layout;
  using ProbLayout = typename Cfg::ProbLayout;
  constexpr int kRows = Cfg::kRows;
  const tile::RowScale one = tile::RowScale::uniform(1.f), scale = tile::RowScale::uniform(p.attn.softmax_scale);
  // Re-read every tile (common/opaque.cuh): hoisted out of the loop, the
  // offsets derived from the thread's position would spill.
  const int consumer_tid = opaque_thread_index<Cfg::kConsumers * 128>(128);  // over both consumers
  const int lane = consumer_tid % 32;
  const int row0 = consumer_tid % 128 / 32 * 16;  // the warp's query rows and key rows
  const int valid = t.block.row_count;
  const uint32_t q_addr = operand_address(in.template data<T>(kTensorQ));
  const uint32_t k_addr = operand_address(in.template data<T>(kTensorK));
  const uint32_t v_addr = operand_address(in.template data<T>(kTensorV));
  const uint32_t dout_addr = operand_address(in.template data<T>(kTensorDout));

  begin_backward_tile<Layout, kRows, D, Cfg::kConsumerThreads, T>(hooks, t, in, consumer_tid);

  // S = Q K^T and dP = dO V^T over the head's real columns.
  tile::Accumulator<kRows> s, ds;
  wgmma_fence();
  issue_ss_product<T, kRows, D, Layout>(s.regs(), q_addr, k_addr);
  issue_ss_product<T, kRows, D, Layout>(ds.regs(), dout_addr, v_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(s.regs());
  fence_registers(ds.regs());
  in.release(kTensorV, lane);

  float row_sum[2];
  tile::exp_rows_in_tile(s, t.block, row0, p.attn.scale_log2, row_sum, lane);
  tile::softmax_grad_rows(s, ds, tile::inverse_valid_rows(row_sum, row0, valid, lane));
  if (consumer == 0)
    stage_rows_by_matrices<ProbLayout, T>(s, one, tile::smem_u32(sm.probs), row0, lane);
  else
    stage_rows_by_matrices<ProbLayout, T>(ds, one, tile::smem_u32(sm.dscores), row0, lane);
  tile::OperandA<kRows> ds_rows = tile::to_operand<T>(ds);
  named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);  // P and dS of all rows are in place
  tile::OperandA<kRows> p_keys = transposed_rows<T, kRows, kRows, ProbLayout>(sm.probs, row0, lane);
  tile::OperandA<kRows> ds_keys = transposed_rows<T, kRows, kRows, ProbLayout>(sm.dscores, row0, lane);
  // Every warp holds its P^T and dS^T rows: the staging tile is free.
  named_barrier_sync(kConsumersBarrier, Cfg::kConsumerThreads);

  // This consumer's kN output columns from col0 (kStore of them real) of dQ =
  // scale dS K, dV = P^T dO, dK = scale dS^T Q, each staged in the warp's
  // rows of the consumer's chunks and stored.
  auto outputs = [&](auto cols, auto store_cols) {
    constexpr int kN = decltype(cols)::value, kStore = decltype(store_cols)::value;
    const int col0 = consumer * Cfg::kFirstCols;
    const uint32_t from_col0 = (col0 / Cfg::kChunkCols) * Cfg::kChunkBytes;
    T* const staging = sm.staging + (col0 / Cfg::kChunkCols) * Layout::kChunkElems;
    auto write = [&](const tile::Accumulator<kN>& acc, const tile::RowScale& factor, const TensorView& out,
                     const CUtensorMap& map, int head) {
      // Every lane, and the TMA unit, has read what the warp staged here
      // before (P or dS, the previous output).
      wait_store_reads(lane);
      stage_rows_by_matrices<Layout, T>(acc, factor, tile::smem_u32(staging), row0, lane);
      store_staged_rows<Layout, kStore, kRowWalk>(map, staging, out, t.block, head, col0, row0, lane);
    };
    {
      tile::Accumulator<kN> dq;
      wgmma_rs_tile<T, kN, Layout>(dq, ds_rows, k_addr + from_col0);
      in.release(kTensorK, lane);
      hooks.epilogue(tile::Output::kDq, dq, t, row0, col0, lane);
      write(dq, scale, p.dq, p.dq_map, t.q_head);
    }
    {
      tile::Accumulator<kN> dv;
      wgmma_rs_tile<T, kN, Layout>(dv, p_keys, dout_addr + from_col0);
      in.release(kTensorDout, lane);
      hooks.epilogue(tile::Output::kDv, dv, t, row0, col0, lane);
      write(dv, one, p.dv, p.dv_map, t.kv_head);
    }
    {
      tile::Accumulator<kN> dk;
      wgmma_rs_tile<T, kN, Layout>(dk, ds_keys, q_addr + from_col0);
      in.release(kTensorQ, lane);
      hooks.epilogue(tile::Output::kDk, dk, t, row0, col0, lane);
      write(dk, scale, p.dk, p.dk_map, t.kv_head);
    }
  };
  // Hooks that need whole output rows in one accumulator (rotary's transpose
  // rotation pairs column j with j + r/2) split the outputs by tensor
  // instead: consumer 0 computes dQ and dV, consumer 1 dK, each over every
  // column, stored from registers (a second full-width staging tile would
  // leave the ring too few slots). The products are cheap beside the bytes
  // here, so the 2 : 1 split costs little.
  auto whole_rows = [&](tile::OperandA<kRows>& a, uint32_t b_addr, BackwardTensor last_read, tile::Output o,
                        const tile::RowScale& factor, const TensorView& out, int head) BLOCKATTN_INLINE {
    tile::Accumulator<Cfg::kPaddedD> acc;
    wgmma_rs_tile<T, Cfg::kPaddedD, Layout>(acc, a, b_addr);
    in.release(last_read, lane);
    hooks.epilogue(o, acc, t, row0, 0, lane);
    tile::store_rows_direct<T, Cfg::kPaddedD, D>(acc, factor, tile::head_rows_out<T>(out, t.block, head),
                                                 out.token_stride, row0, valid, lane);
  };
  if constexpr (Hooks::kWholeRows) {
    if (consumer == 0) {
      in.release(kTensorQ, lane);  // dK's operand, consumer 1's
      whole_rows(ds_rows, k_addr, kTensorK, tile::Output::kDq, scale, p.dq, t.q_head);
      whole_rows(p_keys, dout_addr, kTensorDout, tile::Output::kDv, one, p.dv, t.kv_head);
    } else {
      in.release(kTensorK, lane);  // dQ's and dV's operands, consumer 0's
      in.release(kTensorDout, lane);
      whole_rows(ds_keys, q_addr, kTensorQ, tile::Output::kDk, scale, p.dk, t.kv_head);
    }
  } else if (consumer == 0) {
    outputs(Cols<Cfg::kFirstCols>{}, Cols<Cfg::kFirstCols>{});
  } else {
    outputs(Cols<Cfg::kPaddedD - Cfg::kFirstCols>{}, Cols<D - Cfg::kFirstCols>{});
  }
  // Every lane's stores, and the TMA unit, have read the warp's rows before
  // the next tile's P or dS lands there (and before the CTA exits).
  wait_store_reads(lane);
}

template <typename T, int D, core::Fusion F>
__global__ void __launch_bounds__(ColumnSplitBackwardConfig<T, D>::kThreads, 1)
    column_split_backward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // launched overlapping the schedule kernel (schedule/programmatic_launch.cuh)
  using Cfg = ColumnSplitBackwardConfig<T, D>;
  extern __shared__ unsigned char smem_raw[];
  const ColumnSplitBackwardSmem<T, D> sm(smem_raw);
  const tile::Hooks<F> hooks(p.attn);
  run_backward_tensor_ring<Cfg>(p, sm.ring, hooks,
                                [&](const tile::TileCoords& t, const auto& tensors, int consumer) BLOCKATTN_INLINE {
                                  column_split_backward_tile<T, D>(p, hooks, sm, t, tensors, consumer);
                                });
}

}  // namespace blockattn::sm90
