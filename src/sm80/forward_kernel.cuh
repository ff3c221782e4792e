// sm80 forward kernel: one (block, query head) tile of kRows queries x kKeys
// keys per step of a persistent CTA of one warp per 16 query rows (2, 4 or 8
// warps for 32-, 64- and 128-token blocks), each warp owning its rows end to
// end (S, softmax, P V, normalization, store).
//
//   frame:   a persistent loop over the CTA's tiles, claimed at run time
//            (schedule/tile_claims.cuh: a static walk left the SMs that
//            draw less bandwidth idle at the end, 6% of the kernel on
//            average at D = 256), with kStages shared-memory stages of
//            {Q, K, V} (forward_stages): while the CTA computes tile i from
//            one stage, cp.async fills the others with the next kStages - 1
//            tiles. Wide heads, whose two stages would pass what every
//            sm_80+ GPU gives a CTA, have one stage: the other resident CTAs
//            overlap the loads;
//   loader:  forward_issue_loads (cp.async, rows past the block zero-filled);
//   tile op: forward_tile, with the hooks of tile/hooks.cuh.
// The output is staged in the warp's own Q rows (no other warp reads them, and
// S is done) and leaves as 16-byte stores that nothing waits for.
#pragma once

#include "common/kernel_launcher.cuh"
#include "common/opaque.cuh"
#include "schedule/tile_claims.cuh"
#include "sm80/params.h"
#include "sm80/tile_loads.cuh"
#include "sm80/warp_gemm.cuh"
#include "tile/hooks.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm80 {

// Shared-memory stages of {Q, K, V}: two where they fit in 96 KB, so that
// two CTAs stay resident (one where they do not: the other resident CTAs
// overlap the loads), and three for the plain kernel at D = 96, whose
// 36 KB stages leave room for two tiles loaded ahead: headdim-d96-h5 88.0-88.8
// -> 89.3-89.8% of copy (H100). The rotary kernel there measured slower with
// three (1.29x against 1.12x the plain forward's time; docs/perf.md, "The
// sm80 forward at D = 96").
constexpr int forward_stages(int head_dim, int block_size, core::Fusion fusion) {
  const int stage_bytes = 3 * block_size * head_dim * 2;
  if (head_dim == 96 && block_size == 64 && fusion == core::Fusion::kNone) return 3;
  return 2 * stage_bytes <= 96 * 1024 ? 2 : 1;
}

template <typename T, int D, int B, core::Fusion F>
struct ForwardConfig {
  static_assert(B == 32 || B == 64 || B == 128, "one warp per 16 query rows of a 32-, 64- or 128-token block");
  static constexpr int kRows = B;  // query rows of a tile: the tokens of a block
  static constexpr int kKeys = B;  // key columns of S
  static constexpr int kWarps = kRows / 16;
  static constexpr int kThreads = 32 * kWarps;
  // forward_kernel()'s first step: where the runtime loads this kernel's
  // sm_90a code (the D >= 224 units, CMakeLists.txt), it is launched
  // overlapping the schedule (KernelLauncher reads the code's PTX version).
  static constexpr bool kWaitsForPriorGrids = true;
  static constexpr int kTileElems = kRows * D;
  static constexpr int kStageBytes = 3 * kTileElems * 2;  // Q, K, V
  static constexpr int kStages = forward_stages(D, B, F);
  // Columns of O per product: whole rows where they fit beside P (P of a
  // 128-key row takes as many registers as 64 columns of O).
  static constexpr int kOutCols = D <= (B == 128 ? 64 : 128) ? D : D % 64 == 0 ? 64 : D / 2;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  // Enough resident CTAs to keep loads in flight; the launch bound caps
  // registers accordingly (measured: docs/perf.md). A 128-token block's
  // eight warps hold S rows of 128 keys (64 registers): two CTAs of 256
  // threads leave them 128 registers. Three CTAs at D = 96 measured slower
  // (86 -> 80%, H200: the cap spills).
  static constexpr int kMinCtasPerSm = B == 128 ? 2 : D <= 64 ? 3 : 2;
  // The widest heads (D >= 224), whose hoisted load offsets spilled (84
  // bytes at D = 256), recompute them per tile: each tile's one load of a
  // 84-96 KB stage pays little for it, and it freed 60 registers (D = 256:
  // 255 with spills -> 199, none); +4 points at D = 256, +1 at D = 224
  // (H100, docs/perf.md, "Session 34", item 2). D = 160 and 192 did not
  // spill, and lost 2.5 points at D = 160 with both changes.
  static constexpr bool kWidest = D >= 224;
  static constexpr bool kHoistLoadOffsets = sm80::kHoistLoadOffsets<kRows> && !kWidest;
  // Where a round of the CTA's copies covers whole rows (D = 256: 32 units
  // a row, 128 threads), the recomputed copies step through the rows
  // instead (load_tile_async_stepped): 128 registers against 198. H200:
  // bench_blockattn level (103.7%), bench/compare.py 1.7% faster
  // (docs/perf.md, "Session 47", item 2).
  static constexpr bool kSteppedLoads = kWidest && kThreads % (D / 8) == 0 && D % 64 == 0;
  // Tiles' schedule entries read a tile before their use (forward_kernel),
  // where it measured faster (docs/perf.md, "The sm80 forward's schedule
  // entries, read ahead"): the plain kernels at D <= 128 with 32- and
  // 64-token blocks, and the widest heads once their load offsets left the
  // registers (+1.4 points at D = 256, +0.8 at D = 224). Not with rotary
  // (D = 96: 1.13x -> 1.29x the plain forward's time), nor where registers
  // are short: D = 160 and 192 (-0.3 to -1.5 points) and 128-token blocks,
  // whose 128-register cap spills (+2.4 points at D = 128 in one build, -8
  // in another).
  static constexpr bool kReadEntriesAhead = (D <= 128 || kWidest) && B <= 64 && F == core::Fusion::kNone;
  // How O's rows leave (tile/row_io.cuh). The stepped walk cost 128-token
  // blocks 1.2 points at D = 64 and 2 at D = 128 against per-unit addresses
  // (docs/perf.md, "A regression at 128-token blocks, found by the sweep").
  static constexpr tile::RowWalk kOutWalk = B == 128 ? tile::RowWalk::kPerUnit : tile::RowWalk::kStepped;
};

// The operand tiles of one stage, by role.
template <typename T, int D, int B>
struct ForwardOperands {
  using Layout = tile::SwizzledRows<D>;
  static constexpr int kTileElems = B * D;
  T* q;
  T* k;
  T* v;
  __device__ explicit ForwardOperands(T* stage) : q(stage), k(stage + kTileElems), v(stage + 2 * kTileElems) {}
};

template <typename T, int D, int B, core::Fusion F>
__device__ __forceinline__ void forward_issue_loads(const Params& p, const tile::TileCoords& t, T* stage) {
  using Cfg = ForwardConfig<T, D, B, F>;
  const ForwardOperands<T, D, B> ops(stage);
  const int valid = t.block.row_count;
  auto load = [&](T* tile, const T* src, int64_t row_stride) {
    if constexpr (Cfg::kSteppedLoads)
      load_tile_async_stepped<Cfg::kRows, D, Cfg::kThreads>(tile, src, row_stride, valid);
    else
      load_tile_async<Cfg::kRows, D, Cfg::kThreads, Cfg::kHoistLoadOffsets>(tile, src, row_stride, valid);
  };
  load(ops.q, tile::head_rows<T>(p.q, t.block, t.q_head), p.q.token_stride);
  load(ops.k, tile::head_rows<T>(p.k, t.block, t.kv_head), p.k.token_stride);
  load(ops.v, tile::head_rows<T>(p.v, t.block, t.kv_head), p.v.token_stride);
}

template <typename T, int D, int B, core::Fusion F>
__device__ __forceinline__ void forward_tile(const Params& p, const tile::Hooks<F>& hooks, const tile::TileCoords& t,
                                             T* stage) {
  using Cfg = ForwardConfig<T, D, B, F>;
  using Hooks = tile::Hooks<F>;
  using Layout = tile::SwizzledRows<D>;
  const int tid = opaque(static_cast<int>(threadIdx.x));  // see common/opaque.cuh
  const int lane = tid % 32, row0 = 16 * (tid / 32);
  const ForwardOperands<T, D, B> ops(stage);
  hooks.template prologue<Layout, Cfg::kRows, D, Cfg::kThreads>(t, tid, ops.q, ops.k, ops.v);
  if constexpr (Hooks::kModifiesOperands) __syncthreads();  // every thread's prologue writes before any product

  tile::Accumulator<Cfg::kKeys> s;
  s.zero();
  gemm_abt<T, Cfg::kKeys, D>(s, ops.q, row0, ops.k, lane);

  float row_sum[2];
  tile::exp_rows_masked(s, t.block.row_count, p.attn.scale_log2, row_sum, lane);
  const tile::OperandA<Cfg::kKeys> probs = tile::to_operand<T>(s);

  // O = P V, normalized and staged in the warp's own Q rows (dead: only this
  // warp read them, and S is done) once every lane's ldmatrix reads of them
  // are behind it. Wide heads take O in two column halves, so that one
  // half's accumulator and P fit the registers together.
  constexpr int kOutCols = Cfg::kOutCols;
  const tile::RowScale inverse = tile::inverse(row_sum);
  __syncwarp();
#pragma unroll
  for (int c = 0; c < D / kOutCols; ++c) {
    tile::Accumulator<kOutCols> o;
    o.zero();
    gemm_rab<T, kOutCols, Cfg::kKeys, D>(o, probs, ops.v, kOutCols * c, lane);
    hooks.epilogue(tile::Output::kOut, o, t, row0, kOutCols * c, lane);
    tile::stage_rows<Layout, T>(o, inverse, ops.q, row0, kOutCols * c, lane);
  }
  __syncwarp();
  tile::store_rows<Layout, D, Cfg::kOutWalk>(ops.q, row0, tile::head_rows_out<T>(p.out, t.block, t.q_head),
                                             p.out.token_stride, t.block.row_count, lane);
}

template <typename T, int D, int B, core::Fusion F>
__global__ void __launch_bounds__(ForwardConfig<T, D, B, F>::kThreads, ForwardConfig<T, D, B, F>::kMinCtasPerSm)
    forward_kernel(const __grid_constant__ Params p) {
  wait_for_prior_grids();  // a no-op in the compute_80 pass, which is never launched overlapping
  using Cfg = ForwardConfig<T, D, B, F>;
  extern __shared__ __align__(128) unsigned char smem[];
  // Stage s starts at smem + s * kStageBytes (arithmetic, not an array of
  // pointers: a runtime-indexed array would live in local memory).
  auto stage_ptr = [&](int s) { return reinterpret_cast<T*>(smem + s * Cfg::kStageBytes); };
  const tile::Hooks<F> hooks(p.attn);

  const int num_tiles = p.attn.schedule.block_count() * p.attn.num_q_heads;
  // The first kStages - 1 tiles' loads (with one stage, the first tile's),
  // one commit group each (possibly empty), so that "all but the newest
  // kStages - 1 groups" below always means the current tile.
  constexpr int kTilesAhead = Cfg::kStages > 1 ? Cfg::kStages - 1 : 1;
  // The CTA's tiles, claimed at run time (schedule/tile_claims.cuh): iteration
  // i reads the tiles of iterations i, i + kTilesAhead (its loads) and
  // i + kTilesAhead + 1 (its schedule entry, read ahead), so claims run one
  // iteration further ahead than the last of those.
  using Walk = schedule::ClaimedWalk<kTilesAhead + 2>;
  __shared__ int claimed_tiles[Walk::kRing];
  const Walk walk(p.attn.schedule.claims, claimed_tiles);
  const bool claimer = threadIdx.x == 0;

  // The schedule entries of this CTA's next tiles. Read at their use, they
  // stall every warp at the head of each tile and before each tile's loads
  // (47% of the stall samples at headdim-d96-h5; docs/perf.md, "The sm80
  // forward's schedule entries, read ahead"); with kReadEntriesAhead,
  // ring[j] holds iteration i + j's, read one iteration before its first use.
  auto entry_of = [&](int t) {
    return t < num_tiles ? p.attn.schedule.blocks[t / p.attn.num_q_heads] : schedule::BlockDesc{};
  };
  schedule::BlockDesc ring[kTilesAhead + 1];
  auto coords = [&](int i, int j) {  // iteration i + j's; j: a compile-time index after unrolling
    const int t = walk.tile(i + j);
    if constexpr (Cfg::kReadEntriesAhead) return tile::TileCoords::per_query_head(p.attn, t, ring[j]);
    return tile::TileCoords::per_query_head(p.attn, t);
  };
  if constexpr (Cfg::kReadEntriesAhead) {
#pragma unroll
    for (int j = 0; j <= kTilesAhead; ++j)
      ring[j] = entry_of(walk.tile(j));
  }
#pragma unroll
  for (int s = 0; s < kTilesAhead; ++s) {
    if (walk.tile(s) < num_tiles) forward_issue_loads<T, D, B, F>(p, coords(0, s), stage_ptr(s));
    cp_async_commit();
  }

  for (int i = 0; walk.tile(i) < num_tiles; ++i) {
    T* const current = stage_ptr(i % Cfg::kStages);
    [[maybe_unused]] int claimed;
    if (claimer) claimed = walk.claim_issue();
    // Each iteration issues the loads of iteration i + kTilesAhead's tile.
    auto ahead_exists = [&] { return walk.tile(i + kTilesAhead) < num_tiles; };
    if constexpr (Cfg::kStages > 1) {
      // The stage the previous tile used: every thread is past it (the
      // __syncthreads after that tile).
      if (ahead_exists())
        forward_issue_loads<T, D, B, F>(p, coords(i, kTilesAhead), stage_ptr((i + kTilesAhead) % Cfg::kStages));
      cp_async_commit();
    }
    // The entry after ring[kTilesAhead], read now and used next iteration.
    [[maybe_unused]] schedule::BlockDesc incoming;
    if constexpr (Cfg::kReadEntriesAhead) incoming = entry_of(walk.tile(i + kTilesAhead + 1));
    cp_async_wait<Cfg::kStages - 1>();
    __syncthreads();
    forward_tile<T, D, B, F>(p, hooks, coords(i, 0), current);
    if (claimer) walk.claim_store(i, claimed);
    __syncthreads();  // this stage is refilled next; the claim is visible from the next iteration on
    if constexpr (Cfg::kStages == 1) {
      if (ahead_exists()) forward_issue_loads<T, D, B, F>(p, coords(i, kTilesAhead), current);
      cp_async_commit();
    }
    if constexpr (Cfg::kReadEntriesAhead) {
#pragma unroll
      for (int j = 0; j < kTilesAhead; ++j)
        ring[j] = ring[j + 1];
      ring[kTilesAhead] = incoming;
    }
  }
  if (claimer) walk.finish();
}

}  // namespace blockattn::sm80

namespace blockattn {
template <typename T, int D, int B, core::Fusion F>
struct KernelOf<sm80::Params, Operation::kForward, T, D, B, F> {
  using Config = sm80::ForwardConfig<T, D, B, F>;  // its stage count depends on the fusion
  static constexpr auto kernel = sm80::forward_kernel<T, D, B, F>;
};
}  // namespace blockattn
