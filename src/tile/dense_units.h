// The dense forward's units of work, host-callable (tests/cpu/
// dense_schedule_test.cpp checks the rows and key tiles they give every
// consumer warpgroup): a unit's (batch, head, first query row) from its
// row block, and the key tiles a run of its rows visits.
// tile/dense_schedule.cuh walks them on the device.
#pragma once

#include "common/dense_params.h"
#include "schedule/block_schedule.h"  // BA_HOST_DEVICE

namespace blockattn::tile {

struct DenseUnit {
  int batch, q_head, kv_head;
  // First query row of the unit; negative in a causal block 0 shifted before
  // row 0. Its row pointers (unit_rows) then start before the tensor, but
  // only rows >= 0 are accessed: a consumer whose rows all lie before row 0
  // sees no key tiles and stores nothing.
  int row0;
};

// kShifted: whether the blocks may start before row 0 (a.row_shift, only
// ever non-zero under a causal mask); a compile-time choice so that kernels
// without the mask carry no shift.
template <bool kShifted>
BA_HOST_DEVICE DenseUnit dense_unit_of(const DenseAttnParams& a, int batch_head, int m_block, int rows_per_unit) {
  DenseUnit u;
  u.batch = batch_head / a.num_q_heads;
  u.q_head = batch_head % a.num_q_heads;
  u.kv_head = u.q_head / a.group_size;
  u.row0 = m_block * rows_per_unit - (kShifted ? a.row_shift : 0);
  return u;
}

// Key tiles of kKeys keys that rows [row0, row0 + rows) visit (none when the
// rows all lie past the sequence end), and whether tile n needs the mask (it
// crosses the causal diagonal or the sequence end).
template <int kKeys>
struct KeyTiles {
  int count;
  int first_masked;  // tiles >= this one need masking

  BA_HOST_DEVICE static KeyTiles of(const DenseAttnParams& a, int row0, int rows) {
    const int key_end = a.causal ? smaller(row0 + rows, a.seq_len) : a.seq_len;
    KeyTiles t;
    t.count = row0 < a.seq_len ? (key_end + kKeys - 1) / kKeys : 0;
    // Causal: tile n is fully visible to every row when its last key
    // (n + 1) kKeys - 1 <= row0. The sequence end masks only a partial last tile.
    const int causal_clear = a.causal ? (row0 + 1) / kKeys : t.count;
    const int tail_clear = a.seq_len / kKeys;
    t.first_masked = smaller(causal_clear, tail_clear);
    return t;
  }
  BA_HOST_DEVICE static int smaller(int x, int y) { return x < y ? x : y; }  // min() of host and device alike
};

}  // namespace blockattn::tile
