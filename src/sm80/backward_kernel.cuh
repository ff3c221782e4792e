// sm80 backward kernel: one CTA tile per (block, KV head). For each query head
// of the KV group it recomputes P from Q and K, forms dS in registers
// (tile/softmax.cuh: no preprocessing kernel, no stored forward output), and
// accumulates dK and dV over the group in registers, so the result is
// deterministic without atomics.
//
// Warp w owns query rows [16w, 16w+16) for S, dP, dS and dQ, and key rows
// [16w, 16w+16) for dK and dV, which reduce over all query rows: P and dS go
// through shared memory for those two products.
//
// Wide heads (D > 128), and D > 64 at 128-token blocks: a warp's dK and dV
// rows would not fit the registers beside its rows of S and dP (D/2 each, and
// 128-key rows of S and dP take 64 registers each), so they are computed in
// two column passes over the KV group (P and dS recomputed in the second, Q
// and dO reloaded only for groups), and every output leaves straight from
// registers: K and V are read again by the second pass, and skipping the dQ
// staging tile keeps the shared memory within what every sm_80+ GPU gives a
// CTA (a 128-token block's at D = 128, 192 KB, fits sm_90's 227 KB only).
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

// Tiles' schedule entries copied to shared memory a tile before their use
// (backward_kernel), where that measured faster (docs/perf.md, "The sm80
// backward's schedule entries, read ahead"): the plain kernels at D = 64 and
// 96 with 64-token blocks (+0.5 to +2 points) and at D = 128 with 32-token
// ones (74 -> 88%). Elsewhere it moved ptxas's allocation at the register
// cap for the worse (-1.5 to -2.5 points; D = 96 with rotary: 1.64x -> 1.95x
// the plain backward's time).
constexpr bool backward_reads_entries_ahead(int head_dim, int block_size, core::Fusion fusion) {
  return fusion == core::Fusion::kNone &&
         ((block_size == 64 && (head_dim == 64 || head_dim == 96)) || (block_size == 32 && head_dim == 128));
}

template <typename T, int D, int B>
struct BackwardConfig {
  static_assert(B == 32 || B == 64 || B == 128, "one warp per 16 rows of a 32-, 64- or 128-token block");
  static constexpr int kRows = B;  // query rows and key rows of a tile
  static constexpr int kKeys = B;  // key columns of S, dP, dS
  static constexpr int kWarps = kRows / 16;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kTileElems = kRows * D;
  static constexpr int kProbElems = kRows * kKeys;
  static constexpr int kKvPasses = D > 128 || (B == 128 && D > 64) ? 2 : 1;  // column passes of dK and dV
  static constexpr int kKvCols = D / kKvPasses;           // a multiple of 16 for every head dim built
  static constexpr bool kStagesOutputs = kKvPasses == 1;  // else outputs leave from registers
  // A KV group's next query head's Q and dO load into a second pair of tiles
  // while the current head computes (GQA/MQA; a lone head loads as before),
  // where the extra 2 x B x D x 2 bytes keep kMinCtasPerSm CTAs resident:
  // D <= 96 at 64-token blocks. Measured (docs/perf.md, "Group heads' Q and
  // dO loaded ahead"): mqa-d64-h8x1 backward 73.8 -> 80.9% of copy.
  // At D = 128 too, where a whole second pair (2 x 128 KB a CTA) would cost
  // one of the two resident CTAs: the second Q tile takes the dQ staging
  // tile's place, so a group's dQ leaves from registers (a lone head still
  // stages it): gqa-d128-h8x2 backward 78.9 -> 81.7% (docs/perf.md,
  // "Session 24: the prepared patches measured").
  static constexpr bool kGroupPrefetch = B == 64 && D <= 128;
  static constexpr bool kNextQInDqTile = kGroupPrefetch && kStagesOutputs && D == 128;
  // Q, K, V, dO tiles, a dQ staging tile (when staged), P and dS, the second
  // Q (unless in the dQ tile) and dO (kGroupPrefetch), then two schedule
  // entries (backward_reads_entries_ahead).
  static constexpr int kNextPairTiles = kGroupPrefetch ? (kNextQInDqTile ? 1 : 2) : 0;
  static constexpr int kSmemBytes =
      ((kStagesOutputs ? 5 : 4) * kTileElems + 2 * kProbElems + kNextPairTiles * kTileElems) * 2 +
      2 * sizeof(schedule::BlockDesc);
  // 128-token blocks: eight warps of up to 255 registers, one CTA per SM
  // (its shared memory, 144-192 KB, allows no more anyway).
  static constexpr int kMinCtasPerSm = B == 128 ? 1 : D <= 64 ? 3 : 2;
  // 32-token blocks sum each row in one chain and take IEEE reciprocals of
  // the row sums (tile::RowPartials, tile::Reciprocal): with four chains and
  // the approximate reciprocal, ptxas spilled where it had not (sm_90 code:
  // D = 128 56/108 bytes of spill stores/loads against 40/60, D = 64 255
  // registers and 24/40 against 198 and none), and on an H200 the two
  // backwards read 5 and 7 points of copy less than in session 46
  // (docs/perf.md, "Session 60"). Elsewhere the serial form spilled as much
  // or more (D = 32 with rotary 20/92 against 4/4, D = 224 12/16 against
  // none), so the other block sizes keep the parallel chains.
  static constexpr bool kSerialReductions = B == 32;
  // The second pair must not cost a resident CTA on sm_90 (228 KB a SM, 1 KB
  // of it reserved for each CTA).
  static_assert(!kGroupPrefetch || kMinCtasPerSm * (kSmemBytes + 1024) <= 228 * 1024,
                "the second Q/dO pair would lose a resident CTA");
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
  T* q_next;  // kGroupPrefetch: the other query head's Q (kNextQInDqTile: in dq) and dO
  T* dout_next;
  schedule::BlockDesc* entries;  // [2], alternate tiles' (backward_kernel)

  __device__ explicit BackwardSmem(unsigned char* base) {
    using Cfg = BackwardConfig<T, D, B>;
    q = reinterpret_cast<T*>(base);
    k = q + Cfg::kTileElems;
    v = k + Cfg::kTileElems;
    dout = v + Cfg::kTileElems;
    dq = Cfg::kStagesOutputs ? dout + Cfg::kTileElems : nullptr;
    probs = dout + (Cfg::kStagesOutputs ? 2 : 1) * Cfg::kTileElems;
    dscores = probs + Cfg::kProbElems;
    T* const extra = dscores + Cfg::kProbElems;  // the second pair's own tiles, then the entries
    q_next = Cfg::kNextQInDqTile ? dq : extra;
    dout_next = Cfg::kNextQInDqTile ? extra : extra + Cfg::kTileElems;
    entries = reinterpret_cast<schedule::BlockDesc*>(extra + Cfg::kNextPairTiles * Cfg::kTileElems);
  }
};

// Gradients for one query head: accumulates this warp's key rows of dK (unscaled)
// and dV in columns [kKvCols * pass, + kKvCols), and in pass 0 writes this
// warp's rows of dQ. Q and dO of the head are in smem.
template <typename T, int D, int B, typename Hooks, int kKvCols>
__device__ __forceinline__ void backward_query_head(const Params& p, const Hooks& hooks,
                                                    const BackwardSmem<T, D, B>& sm, const tile::TileCoords& t,
                                                    tile::Accumulator<kKvCols>& dk, tile::Accumulator<kKvCols>& dv,
                                                    int pass) {
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
  constexpr int kChains = Cfg::kSerialReductions ? tile::kSerialChains : tile::kParallelChains;
  constexpr auto kRcp = Cfg::kSerialReductions || D > 64 ? tile::Reciprocal::kIeee : tile::Reciprocal::kApprox;
  tile::exp_rows_in_tile<kKeys, tile::RowShift::kRowMax, kChains>(probs, t.block, row0, p.attn.scale_log2, row_sum,
                                                                  lane);
  // Where 1/row_sum is formed (before or after the dP product) only moves
  // ptxas's register allocation; each head dim takes the placement that
  // measured fewest spill bytes (docs/perf.md, "architecture refactor").
  tile::RowScale inv;
  if constexpr (D <= 64) inv = tile::inverse_valid_rows<kRcp>(row_sum, row0, valid, lane);
  tile::Accumulator<kKeys> ds;
  ds.zero();
  gemm_abt<T, kKeys, D>(ds, sm.dout, row0, sm.v, lane);
  if constexpr (D > 64) inv = tile::inverse_valid_rows<kRcp>(row_sum, row0, valid, lane);
  tile::softmax_grad_rows<kKeys, kChains>(probs, ds, inv);

  using ProbLayout = tile::SwizzledRows<kKeys>;
  const tile::RowScale one = tile::RowScale::uniform(1.f);
  tile::stage_rows<ProbLayout, T>(probs, one, sm.probs, row0, 0, lane);
  tile::stage_rows<ProbLayout, T>(ds, one, sm.dscores, row0, 0, lane);
  const tile::OperandA<kKeys> ds_op = tile::to_operand<T>(ds);  // for dQ; packed early to free registers
  __syncthreads();

  // dV += P^T dO and dK += dS^T Q over all query rows, for this warp's keys.
  const int kv_col0 = kKvCols * pass;
  gemm_atb<T, kKvCols, Cfg::kRows, kKeys, D>(dv, sm.probs, row0, sm.dout, kv_col0, lane);
  gemm_atb<T, kKvCols, Cfg::kRows, kKeys, D>(dk, sm.dscores, row0, sm.q, kv_col0, lane);
  if (pass > 0) return;

  // dQ = scale * dS K, in 64-column slices (32 where D is an odd multiple of
  // 32) to bound registers, whole rows where the epilogue needs them; staged
  // in the warp's own rows of the dQ tile, or stored from registers (also
  // where the dQ tile holds a group's next Q: kNextQInDqTile).
  using Layout = tile::SwizzledRows<D>;
  constexpr int kDqCols = Hooks::kWholeRows ? D : (D % 64 == 0 ? 64 : 32);
  const bool stage_dq = Cfg::kStagesOutputs && (!Cfg::kNextQInDqTile || p.attn.group_size == 1);
  const tile::RowScale scale = tile::RowScale::uniform(p.attn.softmax_scale);
  T* const dst = tile::head_rows_out<T>(p.dq, t.block, t.q_head);
#pragma unroll
  for (int c = 0; c < D / kDqCols; ++c) {
    tile::Accumulator<kDqCols> dq;
    dq.zero();
    gemm_rab<T, kDqCols, kKeys, D>(dq, ds_op, sm.k, kDqCols * c, lane);
    hooks.epilogue(tile::Output::kDq, dq, t, row0, kDqCols * c, lane);
    if (stage_dq)
      tile::stage_rows<Layout, T>(dq, scale, sm.dq, row0, kDqCols * c, lane);
    else
      tile::store_rows_direct<T>(dq, scale, dst + kDqCols * c, p.dq.token_stride, row0, valid, lane);
  }
  if (stage_dq) {
    __syncwarp();
    tile::store_rows<Layout, D>(sm.dq, row0, dst, p.dq.token_stride, valid, lane);
  }
}

// This warp's rows of dK (scaled) and dV, columns [kKvCols * pass, + kKvCols):
// staged in the dead K and V tiles (one pass) or stored from registers.
template <typename T, int D, int B, typename Hooks, int kKvCols>
__device__ __forceinline__ void write_kv_gradients(const Params& p, const Hooks& hooks, const BackwardSmem<T, D, B>& sm,
                                                   const tile::TileCoords& t, tile::Accumulator<kKvCols>& dk,
                                                   tile::Accumulator<kKvCols>& dv, int pass) {
  using Cfg = BackwardConfig<T, D, B>;
  using Layout = tile::SwizzledRows<D>;
  static_assert(Cfg::kKvPasses == 1 || !Hooks::kWholeRows, "an epilogue that needs whole rows needs one pass");
  const int lane = threadIdx.x % 32, row0 = 16 * (threadIdx.x / 32), col0 = kKvCols * pass;
  const tile::RowScale dk_scale = tile::RowScale::uniform(p.attn.softmax_scale), one = tile::RowScale::uniform(1.f);
  T* const dk_dst = tile::head_rows_out<T>(p.dk, t.block, t.kv_head);
  T* const dv_dst = tile::head_rows_out<T>(p.dv, t.block, t.kv_head);
  hooks.epilogue(tile::Output::kDk, dk, t, row0, col0, lane);
  hooks.epilogue(tile::Output::kDv, dv, t, row0, col0, lane);
  if constexpr (Cfg::kStagesOutputs) {
    // K and V are no longer read: stage this warp's rows there.
    tile::stage_rows<Layout, T>(dk, dk_scale, sm.k, row0, 0, lane);
    tile::stage_rows<Layout, T>(dv, one, sm.v, row0, 0, lane);
    __syncwarp();
    tile::store_rows<Layout, D>(sm.k, row0, dk_dst, p.dk.token_stride, t.block.row_count, lane);
    tile::store_rows<Layout, D>(sm.v, row0, dv_dst, p.dv.token_stride, t.block.row_count, lane);
  } else {
    tile::store_rows_direct<T>(dk, dk_scale, dk_dst + col0, p.dk.token_stride, row0, t.block.row_count, lane);
    tile::store_rows_direct<T>(dv, one, dv_dst + col0, p.dv.token_stride, row0, t.block.row_count, lane);
  }
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
  const int num_kv_heads = p.attn.num_q_heads / p.attn.group_size;
  const int num_tiles = p.attn.schedule.block_count() * num_kv_heads;

  // Each tile's schedule entry is read at its use, or (kEntriesAhead) copied
  // to shared memory a tile ahead, with the previous tile's loads: read at its
  // use, its load stalls the warps before the tile's own loads can be issued
  // (as in the forward; docs/perf.md, "The sm80 forward's schedule entries,
  // read ahead"); held in registers across a tile instead, it made ptxas
  // spill more at D = 128. Tile i's entry is in entries[i % 2]; the barriers
  // of tile i - 1 separate its copy from tile i - 2's reads.
  constexpr bool kEntriesAhead = backward_reads_entries_ahead(D, B, F);
  const int grid = static_cast<int>(gridDim.x);
  int i = 0;
  for (int tile_index = blockIdx.x; tile_index < num_tiles; tile_index += grid, ++i) {
    const schedule::BlockDesc entry =
        kEntriesAhead && i > 0 ? sm.entries[i % 2] : p.attn.schedule.blocks[tile_index / num_kv_heads];
    const int next = tile_index + grid;
    if (kEntriesAhead && threadIdx.x == 0 && next < num_tiles) {  // committed with this tile's loads, or below
      const schedule::BlockDesc* from = p.attn.schedule.blocks + next / num_kv_heads;
      const uint32_t to = tile::smem_u32(sm.entries + (i + 1) % 2);
      cp_async_8(to, from);
      cp_async_8(to + 8, reinterpret_cast<const char*>(from) + 8);
    }
    const tile::TileCoords t = tile::TileCoords::per_kv_head(p.attn, num_kv_heads, tile_index, entry);
    const int valid = t.block.row_count;
    if (valid == 0) {  // a sequence packed into an earlier tile (CTA-uniform: no barrier skipped alone)
      if constexpr (kEntriesAhead) {
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();  // the next entry has landed
      }
      continue;
    }

    load_tile_async<kRows, D, kT>(sm.k, tile::head_rows<T>(p.k, t.block, t.kv_head), p.k.token_stride, valid);
    load_tile_async<kRows, D, kT>(sm.v, tile::head_rows<T>(p.v, t.block, t.kv_head), p.v.token_stride, valid);

#pragma unroll 1
    for (int pass = 0; pass < Cfg::kKvPasses; ++pass) {
      tile::Accumulator<Cfg::kKvCols> dk, dv;
      dk.zero();
      dv.zero();
      // Head g's Q and dO: in the pair g % 2 with kGroupPrefetch, head g + 1's
      // loading while g computes (a pair is reloaded after the barrier that
      // ends the head that read it); else in the one pair, loaded at g's turn.
      auto pair = [&](int g) {
        BackwardSmem<T, D, B> cur = sm;
        if (Cfg::kGroupPrefetch && g % 2 == 1) cur.q = sm.q_next, cur.dout = sm.dout_next;
        return cur;
      };
      auto load_head = [&](int g) {
        const BackwardSmem<T, D, B> cur = pair(g);
        const int head = t.q_head + g;
        load_tile_async<kRows, D, kT>(cur.q, tile::head_rows<T>(p.q, t.block, head), p.q.token_stride, valid);
        load_tile_async<kRows, D, kT>(cur.dout, tile::head_rows<T>(p.dout, t.block, head), p.dout.token_stride, valid);
        cp_async_commit();
      };
      static_assert(!Cfg::kGroupPrefetch || Cfg::kKvPasses == 1, "one pass over the group");
      if constexpr (Cfg::kGroupPrefetch) load_head(0);
      for (int g = 0; g < p.attn.group_size; ++g) {
        const tile::TileCoords th{t.block, t.q_head + g, t.kv_head, t.block_index};  // this query head of the group
        const BackwardSmem<T, D, B> cur = pair(g);
        if (pass == 0 || p.attn.group_size > 1) {  // a lone head's Q and dO are still there from pass 0
          if constexpr (Cfg::kGroupPrefetch) {
            if (g + 1 < p.attn.group_size) {
              load_head(g + 1);
              cp_async_wait<1>();
            } else {
              cp_async_wait<0>();
            }
          } else {
            load_head(g);
            cp_async_wait<0>();
          }
          __syncthreads();
          // K and V stay in shared memory across the group: transformed once.
          const bool first = pass == 0 && g == 0;
          hooks.template prologue<Layout, kRows, D, kT>(th, threadIdx.x, cur.q, first ? sm.k : nullptr,
                                                        first ? sm.v : nullptr);
          if constexpr (Hooks::kModifiesOperands) __syncthreads();  // prologue writes before any product
        }
        backward_query_head<T, D, B>(p, hooks, cur, th, dk, dv, pass);
        __syncthreads();  // Q, dO, P and dS are rewritten next
      }
      write_kv_gradients<T, D, B>(p, hooks, sm, t, dk, dv, pass);
    }
    __syncthreads();  // staging reads finish before the next tile's loads land
  }
}

}  // namespace blockattn::sm80

BLOCKATTN_KERNEL_OF(sm80, Backward, backward_kernel, BackwardConfig)
