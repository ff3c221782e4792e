// The dense forward's tile scheduler: which (batch, head, query-row block) a
// work unit is, and which key tiles it visits.
//
// Units are grouped in sections of DenseAttnParams::section_heads (batch,
// head) pairs, small enough that a section's K and V stay in L2 while its
// units run. Within a section, units go from the last query block to the
// first, heads fastest: under a causal mask the last blocks see the most
// keys, so persistent CTAs taking units in order start with the longest
// (longest-processing-time first) and finish on short ones.
#pragma once

#include "common/dense_params.h"

namespace blockattn::tile {

struct DenseUnit {
  int batch, q_head, kv_head;
  int row0;     // first query row of the unit
  int key_end;  // keys [0, key_end) can be visited: seq_len, or under a causal mask the unit's last row + 1
};

__device__ __forceinline__ DenseUnit dense_unit(const DenseAttnParams& a, int unit, int rows_per_unit) {
  const int section_units = a.section_heads * a.num_m_blocks;
  const int section = unit / section_units, in_section = unit % section_units;
  const int heads_here = min(a.section_heads, a.batch_heads - section * a.section_heads);
  const int m_block = a.num_m_blocks - 1 - in_section / heads_here;
  const int batch_head = section * a.section_heads + in_section % heads_here;
  DenseUnit u;
  u.batch = batch_head / a.num_q_heads;
  u.q_head = batch_head % a.num_q_heads;
  u.kv_head = u.q_head / a.group_size;
  u.row0 = m_block * rows_per_unit;
  u.key_end = a.causal ? min(u.row0 + rows_per_unit, a.seq_len) : a.seq_len;
  return u;
}

// Key tiles of kKeys keys that rows [row0, row0 + rows) visit, and whether
// tile n needs the mask (it crosses the causal diagonal or the sequence end).
template <int kKeys>
struct KeyTiles {
  int count;
  int first_masked;  // tiles >= this one need masking

  __device__ __forceinline__ static KeyTiles of(const DenseAttnParams& a, int row0, int rows) {
    const int key_end = a.causal ? min(row0 + rows, a.seq_len) : a.seq_len;
    KeyTiles t;
    t.count = (key_end + kKeys - 1) / kKeys;
    // Causal: tile n is fully visible to every row when its last key
    // (n + 1) kKeys - 1 <= row0. The sequence end masks only a partial last tile.
    const int causal_clear = a.causal ? (row0 + 1) / kKeys : t.count;
    const int tail_clear = a.seq_len / kKeys;
    t.first_masked = min(causal_clear, tail_clear);
    return t;
  }
};

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
