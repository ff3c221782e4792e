// sm90 backward for grouped-query attention (Hq = G Hkv, G > 1) at D = 64 and
// 128, 64-token blocks: a unit of work is one block of one KV head with the G query
// heads that read it, in one CTA, so dK and dV are summed over the group in
// registers, in a fixed head order: deterministic, no atomics
// (docs/design/sm90_grouped_backward.md has the plan and the arithmetic).
// With a group of one it is also the MHA backward for batches of a few
// blocks per sequence (BatchKind::kFewBlocks), where it measured 5-8 points
// of copy bandwidth faster than the per-tile kernels, and slower on longer
// sequences (docs/perf.md, "The MHA backward on the grouped kernel's ring");
// and at D = 64 for batches of many blocks (kManyBlocks) in a form whose
// consumers walk their own units, heads in pairs, 3-5 points faster than
// the portable kernel there (docs/perf.md, "The alternate-units ring on
// walks of its own" and "Heads in pairs"). GroupedForm names the three.
//
// Frame: grouped_ring.cuh. A unit's K and V land once in one of two K/V
// pairs; each head's dO and Q stream through a ring of one-tensor slots. DRAM
// traffic is the floor's: Q, dO, dQ per query head, K, V, dK, dV once per
// unit. (Loading K and V again with every head, through the ring, kept the
// frame smaller but read 1.5x the floor's bytes out of L2 and measured 4
// points slower: docs/perf.md, "An sm_90 backward for grouped-query
// attention".)
//
// Tile op for grouped heads at D = 128 (GroupedSplit::kProducts,
// grouped_products_unit): consumer 0 computes S = Q K^T, dP = dO V^T and the
// softmax once per head, hands P and dS to consumer 1 through one of two
// shared buffers, and sums dV += P^T dO; consumer 1 sums dK += dS^T Q and
// computes dQ = dS K, staged in a tile of its own and stored per head.
//
// Tile op of the FewBlocks form at D = 128 (a group of one;
// GroupedSplit::kColumns): the output columns split between the consumer
// warpgroups, 64 + 64. Per head, each consumer computes S, dP and the
// softmax for all 64 rows (twice rather than exchanged: the consumers then
// share no barrier but at partial blocks, and drift apart, one's softmax
// under the other's products), stages P and dS in tiles of its own and reads
// them back transposed. Consumer c owns output columns [64c, 64c + 64):
//   dQ_c  = scale dS K_c     staged over its P tile, stored per head;
//   dV_c += P^T dO_c         in registers across the group,
//   dK_c += dS^T Q_c         stored after the last head (dK scaled once).
// Split this way, grouped heads computed S and dP twice per head and were
// bound by matrix work on an H200 (65% of copy, against 86% split by
// products; docs/perf.md, "Session 31").
// Warp w of a consumer owns rows 16w .. + 16 (of queries and of keys), so
// every staged row is written and stored by one warp.
//
// Tile op at D = 64 (GroupedSplit::kUnits): consumer c takes the CTA's
// units c, c + 2, ... whole, every head of the group with all 64 columns,
// and sums dK and dV in its own registers, each unit with two K/V pairs of
// its own (three on own walks).
//
// Registers per consumer thread: dK + dV 64 across the group (their column
// halves at D = 128, whole at 64), S + dP 64, dQ 32, the A operands (dS rows,
// P^T, dS^T) 48: at most 144 live beside addresses. ptxas reports 168
// registers, the launch bound's share of 384 threads, but allocates the code
// after setmaxnreg.inc up to its kConsumerRegs (232): a test kernel held 220
// live floats there without spilling, and spilled 200 without the
// instruction (docs/perf.md, "Session 49").
#pragma once

#include <type_traits>
#include <utility>

#include "common/opaque.cuh"
#include "sm90/backward_products.cuh"
#include "sm90/backward_tensors.cuh"
#include "sm90/grouped_ring.cuh"
#include "sm90/stage_matrix.cuh"
#include "sm90/tma_store.cuh"
#include "sm90/wgmma.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// How a unit's work divides between the two consumer warpgroups.
enum class GroupedSplit {
  kColumns,   // both on every head, each on its 64 output columns (D = 128)
  kUnits,     // alternate units, each whole, every head and column (D = 64)
  kProducts,  // consumer 0 S, dP, softmax and dV; consumer 1 dK and dQ (grouped heads at D = 128)
};

// The kernel's forms: for grouped heads (KernelOf<...>::Grouped), and with a
// group of one the MHA backward for batches of a few blocks per sequence
// (::FewBlocks) or of many (::ManyBlocks, D = 64 only; core/batch_kind.h).
enum class GroupedForm { kGroups, kFewBlocks, kManyBlocks };

template <typename T, int D, GroupedForm kForm = GroupedForm::kGroups>
struct GroupedBackwardConfig {
  static constexpr int kRows = 64;  // query rows = key rows of a tile, and the TMA box rows
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kWaitsForPriorGrids = true;  // grouped_backward_kernel()'s first step
  static constexpr int kConsumerThreads = 128 * kConsumers;
  using Layout = tile::Chunked<kRows, tile_chunk_cols(Operation::kBackward, D)>;  // the host's maps write this
  static constexpr int kChunkCols = Layout::kChunkColumns;
  static constexpr int kChunks = D / kChunkCols;
  // How the consumers share the work: at D = 128 by output columns, 64 + 64,
  // every consumer on every head; at D = 64 by units, each whole (a 32-column
  // half would begin inside a 128-byte swizzled row, which a wgmma B
  // descriptor cannot address; and the softmax, which both consumers repeat
  // in the column split, weighs twice as much per byte at D = 64). Until
  // session 30 grouped heads at D = 64 were split by heads, consumer 1's
  // partial dK and dV joining consumer 0's through shared memory at every
  // unit's end: whole units on own walks read 67-76% of copy on an H200
  // where that read 62-68 in the same runs, and 93-94 on the H100 as it did
  // (mqa-d64-h8x1; docs/perf.md, "Session 30", "Grouped heads on walks of
  // their own").
  static_assert(kForm != GroupedForm::kManyBlocks || D == 64, "the ManyBlocks form is measured at D = 64 only");
  static constexpr GroupedSplit kSplit = D == 64                         ? GroupedSplit::kUnits
                                         : kForm == GroupedForm::kGroups ? GroupedSplit::kProducts
                                                                         : GroupedSplit::kColumns;
  // How alternate units are walked (grouped_ring.cuh): in the FewBlocks form
  // both consumers wait for every unit's tensors, in stream order
  // (run_grouped_ring); in the ManyBlocks form each consumer walks only its
  // own units (run_alternate_units), which frees the pairs from the slots'
  // bound below. On sequences of two blocks the landed walk leads by 7-10
  // points; from eight blocks the own walks, heads in pairs, lead the
  // portable kernel by 3-5, and trail it by 1.5-4 at four to six
  // (docs/perf.md, "The alternate-units ring on walks of its own" and
  // "Heads in pairs"). Grouped heads at D = 64 walk their own units too.
  static constexpr bool kOwnWalks = D == 64 && kForm != GroupedForm::kFewBlocks;
  // The two consumers take turns to issue their products (sync.cuh's
  // TakeTurns), each head's two batches a turn each. On own walks both
  // consumers walk the same unit pairs, so they run the same number of turns
  // (an empty entry's owner runs its heads' turns empty). H200, headline-d64:
  // +1-3 points (sessions 30 and 31); H100: unchanged, memory-bound at 92.
  // Grouped heads (mqa-d64-h8x1) gained nothing, so they do not take turns.
  static constexpr bool kTakeTurns = kForm == GroupedForm::kManyBlocks;
  // What each row's exponentials are shifted by (tile::RowShift). Grouped
  // heads skip the row max (its 32 FMNMX and four shuffles a thread and
  // head), shifting by the first key's score and redoing a head whose
  // exponentials overflow: mqa-d64-h8x1 (H200, sustained) gained 0.6-1.5
  // points in four calls. The ManyBlocks form (MHA, headline-d64) read 0.6
  // slower with it, so it keeps the max, and so does the FewBlocks form,
  // unmeasured (docs/perf.md, "Session 49").
  static constexpr tile::RowShift kRowShift =
      kForm == GroupedForm::kGroups ? tile::RowShift::kFirstKey : tile::RowShift::kRowMax;
  // A consumer's heads of a unit in the ring's stream: on own walks the
  // other consumer's unit's head lies between two of them (run_alternate_units).
  static constexpr int kHeadStride = kOwnWalks ? 2 * kHeadTensors : kHeadTensors;
  // Outputs through TMA stores (tma_store.cuh) for grouped heads, where they
  // gained 2-3 points of copy bandwidth (gqa-d128-h8x2), and on many blocks;
  // plain 16-byte stores in the FewBlocks form: on the batches it runs
  // (sequences of two or three blocks) TMA stores cost it 6-8 points at
  // D = 64 and 2-3 at D = 128, whole units through TMA as much as all
  // (docs/perf.md, "TMA stores in the FewBlocks kernel").
  static constexpr bool kStoresByTma = kForm != GroupedForm::kFewBlocks;
  static constexpr bool kAllColumns = kSplit != GroupedSplit::kColumns;  // a consumer owns every output column
  static constexpr int kCols = kAllColumns ? D : D / kConsumers;         // output columns a consumer owns
  static_assert(grouped_backward_kernel(D, kRows, false) && (kCols == kChunkCols || kSplit == GroupedSplit::kProducts),
                "one 64-column chunk of each output a consumer owns, staged like a P tile");
  // Warps that release a head's ring slots, and a unit's K and V: its
  // owner's, or every consumer's.
  static constexpr int kHeadReleasers = kSplit == GroupedSplit::kUnits ? 4 : 4 * kConsumers;
  static constexpr int kKvReleasers = kSplit == GroupedSplit::kUnits ? 4 : 4 * kConsumers;
  using ProbLayout = tile::SwizzledRows<kRows>;  // = one chunk of Layout
  static constexpr int kChunkBytes = Layout::kChunkBytes;
  static constexpr int kSlotBytes = kChunks * kChunkBytes;  // one tensor of a tile
  static constexpr int kProbTileBytes = kRows * kRows * 2;  // P or dS
  // K/V pairs (two: a unit's K and V, the next unit's landing in the other;
  // with alternate units two per consumer, or its next unit's could not land
  // while it computes, and three on own walks, two units landing: the
  // owner's K/V wait was 18% of the two-pair ring's stall samples), each
  // consumer's P and dS tiles, and the pairs' full and empty barriers.
  static constexpr int kKvPairs = kSplit == GroupedSplit::kUnits ? (kOwnWalks ? 6 : 4) : 2;
  // Split by products: the P and dS tiles are two buffers that consumer 0
  // fills and consumer 1 reads (with a full and an empty barrier each), and
  // each consumer has a 64 x D tile to stage its outputs in.
  static constexpr int kHandOffs = kSplit == GroupedSplit::kProducts ? 2 : 0;
  static constexpr int kBarrierBytes = (2 * kKvPairs + 2 * kHandOffs) * static_cast<int>(sizeof(Barrier));
  static constexpr int kKvBytes = kKvPairs * 2 * kSlotBytes;
  static constexpr int kProbBytes = kConsumers * 2 * kProbTileBytes;
  static constexpr int kStagingBytes = kSplit == GroupedSplit::kProducts ? kConsumers * kSlotBytes : 0;
  static constexpr int kScratchBytes = kKvBytes + kProbBytes + kStagingBytes + kBarrierBytes;
  // 8 slots at D = 128 (the Q and dO of four heads), 16 (the most) in the
  // FewBlocks form at D = 64, 12 beside the six pairs of own walks.
  // Own walks publish their claimed pairs in static shared memory.
  using Budget = TensorRingBudget<kSlotBytes, kScratchBytes, kOwnWalks ? kAlternateUnitsStaticBytes : 0>;
  static constexpr int kSlots = Budget::kSlots;
  static_assert(kSlots >= 2 * kHeadTensors, "a head's Q and dO and the next head's");
  // Alternate units on the landed walk: every pair serves one consumer
  // (units u, u + kKvPairs, ... have u's parity), and no slot is refilled
  // before both consumers have waited for its tensor (grouped_backward_unit
  // says why this bound). run_alternate_units has its own.
  static_assert(kSplit != GroupedSplit::kUnits || kOwnWalks || (kKvPairs % 2 == 0 && kSlots / kHeadTensors > kKvPairs),
                "alternate units: pairs per consumer, and more units of slots than pairs");
  static constexpr int kSmemBytes = Budget::kSmemBytes;
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  // The query heads of a unit: a group of one in the ManyBlocks form as a
  // constant, its walk's head loops folded away.
  __device__ static int unit_heads(const Params& p) {
    return kForm == GroupedForm::kManyBlocks ? 1 : p.attn.group_size;
  }
};

template <typename T, int D, GroupedForm kForm>
struct GroupedBackwardSmem {
  using Cfg = GroupedBackwardConfig<T, D, kForm>;
  using Ring = TensorRing<Cfg::kSlots, Cfg::kSlotBytes>;
  Ring ring;
  unsigned char* kv;  // kKvPairs x (K, V)
  unsigned char* probs_base;
  unsigned char* staging;  // Cfg::kStagingBytes
  Barrier* kv_full;        // [kKvPairs]
  Barrier* kv_empty;       // [kKvPairs]
  Barrier* handoff_full;   // [kHandOffs]: consumer 0 has staged P and dS
  Barrier* handoff_empty;  // [kHandOffs]: consumer 1's products have read dS

  __device__ explicit GroupedBackwardSmem(unsigned char* raw) {
    ring.base = tile::align_shared_1024(raw);
    kv = ring.base + Cfg::kSlots * Cfg::kSlotBytes;
    probs_base = kv + Cfg::kKvBytes;
    staging = probs_base + Cfg::kProbBytes;
    kv_full = reinterpret_cast<Barrier*>(staging + Cfg::kStagingBytes);
    kv_empty = kv_full + Cfg::kKvPairs;
    handoff_full = kv_empty + Cfg::kKvPairs;
    handoff_empty = handoff_full + Cfg::kHandOffs;
    ring.full = reinterpret_cast<Barrier*>(kv + Cfg::kScratchBytes);
    ring.empty = ring.full + Cfg::kSlots;
  }
  __device__ void init_barriers() const {  // run_grouped_ring's thread 0
    for (int s = 0; s < Cfg::kSlots; ++s) {
      ring.full[s].init(1);
      ring.empty[s].init(Cfg::kHeadReleasers);  // the warps that read a head's tensors
    }
    for (int s = 0; s < Cfg::kKvPairs; ++s) {
      kv_full[s].init(1);
      kv_empty[s].init(Cfg::kKvReleasers);
    }
    for (int s = 0; s < Cfg::kHandOffs; ++s) {
      handoff_full[s].init(128);   // every thread of consumer 0
      handoff_empty[s].init(128);  // every thread of consumer 1
    }
  }
  __device__ KvPair pair(int unit_in_stream) const {
    const auto slot = RingSlot<Cfg::kKvPairs>::of(unit_in_stream);
    unsigned char* k = kv + slot.stage * 2 * Cfg::kSlotBytes;
    return {k, k + Cfg::kSlotBytes, &kv_full[slot.stage], &kv_empty[slot.stage], slot.phase};
  }
  // Consumer c's P tile (its dS tile follows it).
  __device__ T* probs(int consumer) const {
    return reinterpret_cast<T*>(probs_base + consumer * 2 * Cfg::kProbTileBytes);
  }
};

// The consumers' turns (Cfg::kTakeTurns): barriers 4 and 5.
constexpr uint32_t kTurnBarrier0 = 4;

// One unit, the CTA's u-th: the group's heads in order, then dK and dV.
// `first` is the unit's first head's first tensor in the ring's stream, where
// its heads lie Cfg::kHeadStride tensors apart.
template <typename T, int D, GroupedForm kForm, typename Hooks>
__device__ __forceinline__ void grouped_backward_unit(const Params& p, const Hooks& hooks,
                                                      const GroupedBackwardSmem<T, D, kForm>& sm,
                                                      const tile::TileCoords& unit, int u, int first, int consumer) {
  using Cfg = GroupedBackwardConfig<T, D, kForm>;
  using Layout = typename Cfg::Layout;
  using ProbLayout = typename Cfg::ProbLayout;
  using Ring = typename GroupedBackwardSmem<T, D, kForm>::Ring;
  constexpr int kRows = Cfg::kRows, kCols = Cfg::kCols;
  constexpr bool kAllColumns = Cfg::kAllColumns;
  const TakeTurns<2, kTurnBarrier0> turns{consumer};
  if constexpr (Cfg::kTakeTurns) {
    if (u < 2) turns.start();  // the consumer's first unit (run_alternate_units: unit 2k + consumer)
  }
  if constexpr (Cfg::kOwnWalks) {
    // An empty entry of the walk (run_alternate_units): its slots and pair,
    // landed with no bytes, handed back so that their phases stay in step.
    if (unit.block.row_count == 0) {
      const KvPair kv = sm.pair(u);
      const int lane = threadIdx.x % 32;
      kv.full->wait(kv.phase);
      auto in = HeadSlots<Ring, kHeadTensors>::at(sm.ring, first);
#pragma unroll 1
      for (int g = 0; g < Cfg::unit_heads(p); ++g, in = in.advanced(Cfg::kHeadStride)) {
        in.wait(kHeadDout);
        in.wait(kHeadQ);
        in.release_fenced(kHeadDout, lane);
        in.release_fenced(kHeadQ, lane);
        if constexpr (Cfg::kTakeTurns) {
          for (int batch = 0; batch < 2; ++batch) {
            turns.wait_turn();
            turns.pass_turn();
          }
        }
      }
      release_fenced_stage(*kv.empty, lane);
      return;
    }
  } else if constexpr (Cfg::kSplit == GroupedSplit::kUnits) {
    // The other consumer's unit: its tensors waited for all the same, in
    // stream order (tensor_ring.cuh), and that wait must not come after the
    // slot's refill. Once this consumer finishes unit u, the producer may
    // load up to unit u + kKvPairs + 1 (the next needs the pair of this
    // consumer's unit u + 2) before this consumer waits for unit u + 1's
    // tensors, which the producer overwrites with unit u + 1 + kSlots / 2's:
    // hence kSlots / 2 > kKvPairs (the config's static_assert). Six pairs
    // beside twelve slots broke it and hung (docs/perf.md, "Six K/V pairs").
    if ((u & 1) != consumer) {
      const TileTensors<Ring> in{sm.ring, first};
      in.wait(kHeadDout);
      in.wait(kHeadQ);
      return;
    }
  }
  const tile::RowScale one = tile::RowScale::uniform(1.f);
  // Re-read every unit (common/opaque.cuh): hoisted out of the loop, the
  // offsets derived from the thread's position would spill.
  const int consumer_tid = opaque_thread_index<Cfg::kConsumers * 128>(128);  // over both consumers
  const int tid = consumer_tid % 128, lane = consumer_tid % 32;
  const int row0 = tid / 32 * 16;  // the warp's query rows and key rows
  const uint32_t own_barrier = kOwnBarrier0 + consumer;
  const int valid = unit.block.row_count;
  const KvPair kv = sm.pair(u);
  const int col0 = kAllColumns ? 0 : consumer * kCols;
  const uint32_t own_chunk = kAllColumns ? 0 : consumer * Cfg::kChunkBytes;  // its columns in a tile
  T* const probs = sm.probs(consumer);
  T* const dscores = probs + kRows * kRows;
  const uint32_t k_addr = operand_address(kv.k), v_addr = operand_address(kv.v);
  // An output's way out: staged in the warp's rows of the P tile (no warp
  // reads it any more), then either stored through TMA (tma_store.cuh) where
  // the warp's 16 rows lie inside the block, the warp staging there again
  // once the TMA unit has read them; or stored by the warp, its staging free
  // once every lane's reads are done. dQ and dK come scaled (dS is), dV
  // needs none: every output leaves as it is.
  auto write = [&](const tile::Accumulator<kCols>& acc, const TensorView& out, const CUtensorMap& map,
                   int head) BLOCKATTN_INLINE {
    if constexpr (Cfg::kStoresByTma) {
      wait_store_reads(lane);
      stage_rows_by_matrices<ProbLayout, T>(acc, one, tile::smem_u32(probs), row0, lane);
      // The staging read as one chunk of the tile layout (ProbLayout's offsets), the store map's box.
      store_staged_rows<tile::Chunked<kRows, Cfg::kChunkCols>, kCols, kRowWalk>(map, probs, out, unit.block, head, col0,
                                                                                row0, lane);
    } else {
      write_rows_by_matrices<ProbLayout, T, kCols, kCols, kRowWalk>(
          acc, one, probs, row0, tile::head_rows_out<T>(out, unit.block, head) + col0, out.token_stride, valid, lane);
      __syncwarp();
    }
  };

  // Every product must see zeros past the block's end: two tiles' rows
  // from `valid` on, zeroed by the warps that read them, this consumer's
  // alone or both consumers', who then wait for each other.
  auto zero_tail = [&](T* a, T* b, auto by_this_consumer) BLOCKATTN_INLINE {
    constexpr bool kOwn = decltype(by_this_consumer)::value;
    constexpr int kThreads = kOwn ? 128 : Cfg::kConsumerThreads;
    tile::zero_rows_from<Layout, kRows, D, kThreads>(a, valid, kOwn ? tid : consumer_tid);
    tile::zero_rows_from<Layout, kRows, D, kThreads>(b, valid, kOwn ? tid : consumer_tid);
    fence_async_shared();  // generic writes, read next by wgmma (async proxy)
    named_barrier_sync(kOwn ? own_barrier : kConsumersBarrier, kThreads);
  };

  kv.full->wait(kv.phase);
  if (valid < kRows)  // K and V once per unit, by its owner with alternate units
    zero_tail(reinterpret_cast<T*>(kv.k), reinterpret_cast<T*>(kv.v),
              std::bool_constant<Cfg::kSplit == GroupedSplit::kUnits>{});
  tile::Accumulator<kCols> dk, dv;  // this consumer's columns (all at D = 64), summed over the group
  auto in = HeadSlots<Ring, kHeadTensors>::at(sm.ring, first);
#pragma unroll 1
  for (int g = 0; g < p.attn.group_size; ++g, in = in.advanced(Cfg::kHeadStride)) {
    in.wait(kHeadDout);  // every consumer waits for every tensor in stream order (tensor_ring.cuh)
    in.wait(kHeadQ);
    const bool accumulate = g > 0;  // past the first head
    T* const q = in.template data<T>(kHeadQ);
    T* const dout = in.template data<T>(kHeadDout);
    const uint32_t q_addr = operand_address(q), dout_addr = operand_address(dout);
    if (valid < kRows)  // this head's Q and dO, by its consumer where one owns every column
      zero_tail(q, dout, std::bool_constant<kAllColumns>{});

    // S = Q K^T and dP = dO V^T over all 64 rows, in two groups: the
    // exponentials of S run while dP's product does. dS scaled there (exact
    // at D = 64: a scale of 1/8) leaves dQ and dK scaled: 32 multiplies a
    // head fewer in dQ's way out. Then P and dS into the warp's rows of this
    // consumer's P and dS tiles: the last thing there was the warp's own
    // output, stored (by TMA: once the TMA unit has read it).
    tile::Accumulator<kRows> s, ds;
    auto stage_probabilities = [&](auto shift) BLOCKATTN_INLINE {
      const bool held = softmax_of_scores<decltype(shift)::value>(s, ds, unit.block, row0, p.attn.scale_log2, lane,
                                                                  p.attn.softmax_scale);
      if constexpr (Cfg::kStoresByTma) wait_store_reads(lane);
      tile::OperandA<kRows> ds_rows = tile::to_operand<T>(ds);
      stage_operand_matrices<ProbLayout>(tile::to_operand<T>(s), tile::smem_u32(probs), row0, lane);
      stage_operand_matrices<ProbLayout>(ds_rows, tile::smem_u32(dscores), row0, lane);
      return std::pair{ds_rows, held};
    };
    if constexpr (Cfg::kTakeTurns) turns.wait_turn();
    issue_scores<T, kRows, D, Layout>(s, ds, q_addr, dout_addr, k_addr, v_addr);
    if constexpr (Cfg::kTakeTurns) turns.pass_turn();
    auto [ds_rows, held] = stage_probabilities(std::integral_constant<tile::RowShift, Cfg::kRowShift>{});
    if constexpr (Cfg::kRowShift == tile::RowShift::kRowMax) {
      named_barrier_sync(own_barrier, 128);  // P and dS of all rows are in place
    } else if (named_barrier_sync_any(own_barrier, 128, !held)) {
      // P and dS of all rows are in place, unless some row's exponentials
      // overflowed: then the warpgroup (whose products are issued together)
      // redoes the head with the row max, out of turn (the turns order
      // issue for speed only). Q, K, dO and V are still in place, and no
      // warp reads the tiles before the barrier after the redo.
      issue_scores<T, kRows, D, Layout>(s, ds, q_addr, dout_addr, k_addr, v_addr);
      ds_rows = stage_probabilities(std::integral_constant<tile::RowShift, tile::RowShift::kRowMax>{}).first;
      named_barrier_sync(own_barrier, 128);
    }
    tile::OperandA<kRows> p_keys = transposed_rows<T, kRows, kRows, ProbLayout>(probs, row0, lane);
    tile::OperandA<kRows> ds_keys = transposed_rows<T, kRows, kRows, ProbLayout>(dscores, row0, lane);
    // Every warp holds its P^T and dS^T rows before any stages an output over
    // its P rows, or the next head's P and dS.
    named_barrier_sync(own_barrier, 128);

    // dQ = dS K, then dV += P^T dO and dK += dS^T Q (this consumer's
    // columns): dQ leaves while the other two products run.
    tile::Accumulator<kCols> dq;
    if constexpr (Cfg::kTakeTurns) turns.wait_turn();
    wgmma_fence();
    issue_rs_product<T, kCols, Layout>(dq, ds_rows, k_addr + own_chunk, false);
    wgmma_commit();
    issue_rs_product<T, kCols, Layout>(dv, p_keys, dout_addr + own_chunk, accumulate);
    issue_rs_product<T, kCols, Layout>(dk, ds_keys, q_addr + own_chunk, accumulate);
    wgmma_commit();
    if constexpr (Cfg::kTakeTurns) turns.pass_turn();
    wgmma_wait<1>();
    fence_rs_product(dq, ds_rows);
    write(dq, p.dq, p.dq_map, unit.q_head + g);
    wgmma_wait<0>();
    fence_rs_product(dv, p_keys);
    fence_rs_product(dk, ds_keys);
    in.release_fenced(kHeadDout, lane);
    in.release_fenced(kHeadQ, lane);
  }
  release_fenced_stage(*kv.empty, lane);  // the last products that read K and V are done
  write(dv, p.dv, p.dv_map, unit.kv_head);
  write(dk, p.dk, p.dk_map, unit.kv_head);
}

// One unit split by products (GroupedSplit::kProducts, grouped heads at
// D = 128; docs/design/sm90_grouped_backward.md, "Session 31 plan"). The
// column split computed S and dP in both consumers, which bound the kernel
// by matrix work on an H200 (65% of copy; 86% split by products). Per head,
// consumer 0 computes S, dP and the softmax once, stages P and dS in buffer
// n % 2 (n = u G + g, the CTA's head) and sums dV += P^T dO; consumer 1
// takes dS from the buffer, sums dK += dS^T Q and computes dQ = dS K. Every
// product reads its A operand from shared memory (P and dS transposed:
// MN-major), so each consumer holds its D-column sum, 64 registers, and one
// transient pair (S and dP, or dQ) of 64. At D = 64, where the two consumers
// take whole units, the same split read 60% of copy against 70-76 (H200,
// mqa-d64-h8x1, session 31): there it adds a hand-off to every head's chain
// and removes no product.
template <typename T, int D, GroupedForm kForm>
__device__ __forceinline__ void grouped_products_unit(const Params& p, const GroupedBackwardSmem<T, D, kForm>& sm,
                                                      const tile::TileCoords& unit, int u, int first, int consumer) {
  using Cfg = GroupedBackwardConfig<T, D, kForm>;
  using Layout = typename Cfg::Layout;
  using ProbLayout = typename Cfg::ProbLayout;
  using ProbChunk = tile::Chunked<Cfg::kRows, Cfg::kChunkCols>;  // a P or dS tile read as one chunk of Layout
  using Ring = typename GroupedBackwardSmem<T, D, kForm>::Ring;
  constexpr int kRows = Cfg::kRows;
  const tile::RowScale one = tile::RowScale::uniform(1.f), scale = tile::RowScale::uniform(p.attn.softmax_scale);
  const int consumer_tid = opaque_thread_index<Cfg::kConsumers * 128>(128);
  const int tid = consumer_tid % 128, lane = consumer_tid % 32;
  const int row0 = tid / 32 * 16;  // the warp's query rows and key rows
  const uint32_t own_barrier = kOwnBarrier0 + consumer;
  const int valid = unit.block.row_count;
  const KvPair kv = sm.pair(u);
  const uint32_t k_addr = operand_address(kv.k), v_addr = operand_address(kv.v);
  T* const staging = reinterpret_cast<T*>(sm.staging + consumer * Cfg::kSlotBytes);
  // A D-column output through the consumer's staging tile (as `write` in
  // grouped_backward_unit, with the tile layout's D columns).
  auto write = [&](const tile::Accumulator<D>& acc, const tile::RowScale& factor, const CUtensorMap& map,
                   const TensorView& out, int head) BLOCKATTN_INLINE {
    wait_store_reads(lane);
    stage_rows_by_matrices<Layout, T>(acc, factor, tile::smem_u32(staging), row0, lane);
    store_staged_rows<Layout, D, kRowWalk>(map, staging, out, unit.block, head, 0, row0, lane);
  };
  // `acc` (+)= A B over the 64 rows of a tile, A and B from shared memory.
  auto product = [&](tile::Accumulator<D>& acc, uint64_t (*a_desc)(uint32_t, int), uint32_t a_addr, uint32_t b_addr,
                     bool accumulate, auto transposed) BLOCKATTN_INLINE {
#pragma unroll
    for (int kk = 0; kk < kRows / 16; ++kk)
      wgmma_ss_mn<T, D, decltype(transposed)::value>(acc.regs(), a_desc(a_addr, kk), mnmajor_desc<Layout>(b_addr, kk),
                                                     accumulate || kk > 0);
  };
  kv.full->wait(kv.phase);
  tile::Accumulator<D> sum;  // dV (consumer 0) or dK (consumer 1), over the group
#pragma unroll 1
  for (int g = 0; g < p.attn.group_size; ++g) {
    const TileTensors<Ring> in{sm.ring, first + kHeadTensors * g};
    in.wait(kHeadDout);  // every consumer waits for every tensor in stream order (tensor_ring.cuh)
    in.wait(kHeadQ);
    const uint32_t q_addr = operand_address(in.template data<T>(kHeadQ));
    const uint32_t dout_addr = operand_address(in.template data<T>(kHeadDout));
    const auto buffer = RingSlot<2>::of(u * p.attn.group_size + g);
    T* const probs = sm.probs(buffer.stage);
    const uint32_t p_addr = operand_address(probs), ds_addr = p_addr + kRows * kRows * static_cast<uint32_t>(sizeof(T));
    if (consumer == 0) {
      // Rows past the block's end, zeroed before any product reads them:
      // K and V at the unit's first head (consumer 1 reads K after the
      // first hand-off), Q and dO at every head.
      if (valid < kRows) {
        if (g == 0) {
          tile::zero_rows_from<Layout, kRows, D, 128>(reinterpret_cast<T*>(kv.k), valid, tid);
          tile::zero_rows_from<Layout, kRows, D, 128>(reinterpret_cast<T*>(kv.v), valid, tid);
        }
        tile::zero_rows_from<Layout, kRows, D, 128>(in.template data<T>(kHeadQ), valid, tid);
        tile::zero_rows_from<Layout, kRows, D, 128>(in.template data<T>(kHeadDout), valid, tid);
        fence_async_shared();  // generic writes, read next by wgmma (async proxy)
        named_barrier_sync(own_barrier, 128);
      }
      tile::Accumulator<kRows> s, ds;
      issue_scores<T, kRows, D, Layout>(s, ds, q_addr, dout_addr, k_addr, v_addr);
      softmax_of_scores(s, ds, unit.block, row0, p.attn.scale_log2, lane);
      // P and dS into the buffer once consumer 1's products have read its
      // last contents (and this consumer's own dV product, waited for).
      sm.handoff_empty[buffer.stage].wait(buffer.empty_parity());
      stage_rows_by_matrices<ProbLayout, T>(s, one, tile::smem_u32(probs), row0, lane);
      stage_rows_by_matrices<ProbLayout, T>(ds, one, tile::smem_u32(probs + kRows * kRows), row0, lane);
      // Generic writes, read next by wgmma (async proxy): P by this
      // consumer's dV product once every warp has staged its rows; dS (and
      // the zeroed tails) by consumer 1's, released by the arrival.
      fence_async_shared();
      named_barrier_sync(own_barrier, 128);
      sm.handoff_full[buffer.stage].arrive();
      wgmma_fence();
      product(sum, &mnmajor_desc<ProbChunk>, p_addr, dout_addr, g > 0, std::true_type{});  // dV += P^T dO
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(sum.regs());
    } else {
      sm.handoff_full[buffer.stage].wait(buffer.full_parity());
      tile::Accumulator<D> dq;
      wgmma_fence();
      product(sum, &mnmajor_desc<ProbChunk>, ds_addr, q_addr, g > 0, std::true_type{});  // dK += dS^T Q
      product(dq, &kmajor_desc<ProbChunk>, ds_addr, k_addr, false, std::false_type{});   // dQ = dS K
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(sum.regs());
      fence_registers(dq.regs());
      sm.handoff_empty[buffer.stage].arrive();  // the products have read dS: the buffer is free
      write(dq, scale, p.dq_map, p.dq, unit.q_head + g);
    }
    in.release(kHeadDout, lane);
    in.release(kHeadQ, lane);
  }
  release_stage(*kv.empty, lane);  // the last products that read K and V are done
  if (consumer == 0)
    write(sum, one, p.dv_map, p.dv, unit.kv_head);
  else
    write(sum, scale, p.dk_map, p.dk, unit.kv_head);
}

template <typename T, int D, core::Fusion F, GroupedForm kForm = GroupedForm::kGroups>
__global__ void __launch_bounds__(GroupedBackwardConfig<T, D, kForm>::kThreads, 1)
    grouped_backward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // launched overlapping the schedule kernel (schedule/programmatic_launch.cuh)
  static_assert(F == core::Fusion::kNone, "rotary's transpose rotation needs whole rows: grouped_backward_kernel()");
  using Cfg = GroupedBackwardConfig<T, D, kForm>;
  using Layout = typename Cfg::Layout;
  extern __shared__ unsigned char smem_raw[];
  const GroupedBackwardSmem<T, D, kForm> sm(smem_raw);
  const tile::Hooks<F> hooks(p.attn);
  const KvHeadUnits<Layout, Cfg::kChunks> units(p);
  const int num_units = units.count();
  auto load_kv = [&](const tile::TileCoords& unit, const KvPair& kv) { units.load_kv(unit, kv); };
  auto load_head = [&](const tile::TileCoords& unit, int n, unsigned char* slot, Barrier& full) {
    const int head = unit.q_head + n / kHeadTensors;
    const TmaTile tiles[1] = {n % kHeadTensors == kHeadDout ? TmaTile{&p.dout_map, head, slot}
                                                            : TmaTile{&p.q_map, head, slot}};
    load_block_tiles<Layout, Cfg::kChunks>(tiles, unit.block.row_begin, full);
  };
  auto op = [&](const tile::TileCoords& unit, int u, int first, int consumer) BLOCKATTN_INLINE {
    if constexpr (Cfg::kSplit == GroupedSplit::kProducts) {
      static_assert(F == core::Fusion::kNone, "the split by products has no prologue hooks (no rotary)");
      grouped_products_unit<T, D, kForm>(p, sm, unit, u, first, consumer);
    } else {
      grouped_backward_unit<T, D, kForm>(p, hooks, sm, unit, u, first, consumer);
    }
  };
  // The TMA unit reads each warp's last staged output from shared memory
  // after the warp has moved on; the CTA must not exit before it has.
  auto finish = [&] {
    if constexpr (Cfg::kStoresByTma) wait_store_reads(threadIdx.x % 32);
    if constexpr (Cfg::kTakeTurns) {  // where the consumers walked any unit pair
      if (blockIdx.x < (num_units + 1) / 2)
        TakeTurns<2, kTurnBarrier0>{static_cast<int>(threadIdx.x / 128) - 1}.finish();
    }
  };
  if constexpr (Cfg::kOwnWalks)
    run_alternate_units<Cfg>(sm, num_units, Cfg::unit_heads(p), p.attn.schedule.claims, units, load_kv, load_head, op,
                             finish);
  else
    run_grouped_ring<Cfg>(sm, num_units, p.attn.group_size, units, load_kv, load_head, op, finish);
}

}  // namespace blockattn::sm90
