// The dense forward's tile scheduler: which (batch, head, query-row block)
// units a persistent CTA runs, and which key tiles each visits.
//
// A work item is a pair of query blocks of one (batch, head): block
// M - 1 - j and block j (M blocks per head; the middle one alone when M is
// odd). Under a causal mask their key counts add up to the same M + 1 tiles
// for every j, so every item costs the same and a static stride over items
// (CTA c takes items c, c + gridDim.x, ...) balances the CTAs to within one
// item: no atomics, no workspace. Without the mask every unit costs the same
// anyway. The heavy block of a pair runs first. Under the mask a partial
// block (S not a multiple of the unit's rows) is block 0, shifted to start
// before row 0 (DenseAttnParams::row_shift), where its idle rows wait out
// the fewest key tiles.
//
// Items are grouped in sections of DenseAttnParams::section_heads (batch,
// head) pairs, small enough that a section's K and V stay in L2 while its
// items run; within a section, heads go fastest, so the CTAs running at any
// moment read the key tiles of a few heads.
#pragma once

#include "common/dense_params.h"
#include "tile/dense_units.h"

namespace blockattn::tile {

// Calls run(unit) for each unit of this CTA, in order.
template <bool kShifted, typename Run>
__device__ __forceinline__ void for_each_dense_unit(const DenseAttnParams& a, int rows_per_unit, Run&& run) {
  const int section_items = a.section_heads * a.pairs_per_head;
  for (int item = blockIdx.x; item < a.num_items; item += gridDim.x) {
    const int section = item / section_items, in_section = item % section_items;
    const int heads_here = min(a.section_heads, a.batch_heads - section * a.section_heads);
    const int j = in_section / heads_here;
    const int batch_head = section * a.section_heads + in_section % heads_here;
    const int heavy = a.num_m_blocks - 1 - j;
    const int members = j != heavy ? 2 : 1;
    for (int member = 0; member < members; ++member)  // one call site: `run` is inlined once
      run(dense_unit_of<kShifted>(a, batch_head, member == 0 ? heavy : j, rows_per_unit));
  }
}

// The unit's output rows: row `row` of the unit is out + offset + row * seq_stride.
template <typename T>
__device__ __forceinline__ T* unit_rows(const DenseTensorView& t, const DenseUnit& u, int head) {
  return static_cast<T*>(t.data) + u.batch * t.batch_stride + head * t.head_stride + u.row0 * t.seq_stride;
}

// Stores the logsumexp of this lane's two rows (unit rows row0 + lane / 4 and
// + 8) when asked for; one lane of each quad writes.
__device__ __forceinline__ void write_lse(const DenseAttnParams& a, const DenseUnit& u, int row0, const float (&lse)[2],
                                          int lane) {
  if (a.lse == nullptr || lane % 4 != 0) return;
  float* rows = a.lse + (static_cast<int64_t>(u.batch) * a.num_q_heads + u.q_head) * a.seq_len + u.row0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + lane / 4 + 8 * r;
    if (u.row0 + row < a.seq_len) rows[row] = lse[r];
  }
}

}  // namespace blockattn::tile
