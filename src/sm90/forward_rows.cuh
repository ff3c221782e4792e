// The forward's tile operation on one m64 row block (forward_rows), shared
// by the per-tile forward (forward_kernel.cuh) and the grouped-query one
// (grouped_forward.cuh).
#pragma once

#include "sm90/params.h"
#include "sm90/sync.cuh"
#include "sm90/wgmma.cuh"
#include "tile/output_kind.cuh"
#include "tile/row_io.cuh"
#include "tile/softmax.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::sm90 {

// One m64 row block of a tile's queries (its row half `half`) against every
// key, for a consumer warpgroup whose tile is in shared memory, rotated
// where the hooks rotate: S = Q K^T, the exact softmax, O = P V, and O's
// rows written out.
//
// Cfg names the head dim (kHeadDim; kPaddedD, the columns O = P V runs over),
// kKeys, kConsumerRows (64), the tile Layout, and kPacked: whether each row
// sees only its own sequence's keys (a tiles table with packed runs of short
// sequences) or the block's first row_count.
template <typename Cfg, typename Hooks, typename T>
__device__ __forceinline__ void forward_rows(const Params& p, const Hooks& hooks, const tile::TileCoords& t, T* q,
                                             const T* k, const T* v, int half, uint32_t barrier_id, int tid) {
  constexpr int D = Cfg::kHeadDim;
  using Layout = typename Cfg::Layout;
  constexpr int kKeys = Cfg::kKeys;
  const int lane = tid % 32;
  const int row0 = Cfg::kConsumerRows * half + 16 * (tid / 32);  // the warp's query rows in the tile
  const int valid = t.block.row_count;

  // S = Q K^T over D / 16 steps, the row block's queries against every key.
  const uint32_t own_rows = half * Cfg::kConsumerRows * Layout::kRowBytes;  // into each chunk of Q
  const uint32_t q_addr = operand_address(q) + own_rows, k_addr = operand_address(k);
  tile::Accumulator<kKeys> s;
  wgmma_fence();
  issue_ss_product<T, kKeys, D, Layout>(s.regs(), q_addr, k_addr);
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(s.regs());

  float row_sum[2];
  if constexpr (Cfg::kPacked)  // each row sees its own sequence's keys
    tile::exp_rows_in_tile(s, t.block, row0, p.attn.scale_log2, row_sum, lane);
  else
    tile::exp_rows_masked(s, t.block.row_count, p.attn.scale_log2, row_sum, lane);
  tile::OperandA<kKeys> probs = tile::to_operand<T>(s);

  // O = P V over the block's keys; V is the transposed (MN-major) B operand.
  const uint32_t v_addr = operand_address(v);
  tile::Accumulator<Cfg::kPaddedD> o;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    fence_registers(probs.a[kk]);
    wgmma_rs<T, Cfg::kPaddedD>(o.regs(), probs.a[kk], mnmajor_desc<Layout>(v_addr, kk), kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(o.regs());
  hooks.epilogue(tile::Output::kOut, o, t, row0, 0, lane);

  // Normalize and stage O in this warp's rows of the Q buffer, once every
  // warp of the group is past S (the wgmma read all of the row block's Q
  // rows; a later row block's are others), then store the rows that belong
  // to the block. Past 128 columns, staging next to the live accumulator
  // spills (ptxas: 316-712 bytes), so O leaves from registers.
  T* const dst = tile::head_rows_out<T>(p.out, t.block, t.q_head);
  if constexpr (Cfg::kPaddedD > 128) {
    tile::store_rows_direct<T, Cfg::kPaddedD, D>(o, tile::inverse(row_sum), dst, p.out.token_stride, row0, valid, lane);
  } else {
    named_barrier_sync(barrier_id, 128);
    tile::write_rows<Layout, T, Cfg::kPaddedD, D>(o, tile::inverse(row_sum), q, row0, dst, p.out.token_stride, valid,
                                                  lane);
  }
}

}  // namespace blockattn::sm90
