// Where a tile lives: which block of the schedule, which heads, and the
// addresses of a head's rows of that block in a strided [T, H, D] tensor.
//
// Tiles run block-major over heads (tile = block_index * heads + head), so the
// query heads of one KV group are neighbours and find K and V in L2.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/attention_params.h"

namespace blockattn::tile {

// TileCoords::first_position before a hook set has looked it up.
inline constexpr int64_t kUnknownPosition = INT64_MIN;

struct TileCoords {
  schedule::BlockDesc block;
  int q_head, kv_head;
  int block_index;  // in the schedule (its BlockSeq entry)
  // The rotary table row of the block's first token, where the hook set
  // looked it up with the tile's schedule entry (look_ahead, hooks.cuh);
  // kUnknownPosition elsewhere. Kernels without rotary never read it.
  int64_t first_position = kUnknownPosition;

  // A tile per (block, query head): the forward, and any backward with Hq == Hkv.
  BA_HOST_DEVICE static TileCoords per_query_head(const AttentionParams& p, int tile) {
    return per_query_head(p, tile, p.schedule.blocks[tile / p.num_q_heads]);
  }
  // The same with the block's schedule entry already read (a kernel that
  // reads entries ahead of their use: sm80's forward and backward).
  BA_HOST_DEVICE static TileCoords per_query_head(const AttentionParams& p, int tile,
                                                  const schedule::BlockDesc& block) {
    const int block_index = tile / p.num_q_heads;
    const int q_head = tile - block_index * p.num_q_heads;
    return {block, q_head, q_head / p.group_size, block_index};
  }
  // A tile per (block, KV head), covering the group's query heads
  // kv_head * group_size .. + group_size - 1 (q_head is the first).
  BA_HOST_DEVICE static TileCoords per_kv_head(const AttentionParams& p, int num_kv_heads, int tile) {
    return per_kv_head(p, num_kv_heads, tile, p.schedule.blocks[tile / num_kv_heads]);
  }
  BA_HOST_DEVICE static TileCoords per_kv_head(const AttentionParams& p, int num_kv_heads, int tile,
                                               const schedule::BlockDesc& block) {
    const int block_index = tile / num_kv_heads;
    const int kv_head = tile - block_index * num_kv_heads;
    return {block, kv_head * p.group_size, kv_head, block_index};
  }
};

// The coordinates of one walker's units (the sm_90 frame's producer), a
// unit per (block, kHeadsPerUnit neighbouring query heads; the first is
// q_head), in the order it takes them. Its claimed chunks are runs of
// consecutive units: a unit that follows the previous one within the same
// block gets its heads by an increment and the block's schedule entry
// already read, so only a jump (the static first ring, a new chunk) divides
// by the head counts, and only a jump or a new block reads the table. Per
// tile that was two divisions by run-time counts and a dependent table read
// on the producer's serial path: at tail-d64 on an H200 the producer issued
// a tile every ~1 us while the consumers waited on their stages 46% of the
// time (ncu, docs/perf.md "Session 38"). Host-callable, as this file's
// other functions, so that tests/cpu/query_head_walk_test.cpp checks it
// against the division for runs and jumps of every kind.
template <int kHeadsPerUnit = 1>
class QueryHeadCursor {
 public:
  BA_HOST_DEVICE explicit QueryHeadCursor(const AttentionParams& p)
      : p_(p), units_per_block_((p.num_q_heads + kHeadsPerUnit - 1) / kHeadsPerUnit) {}

  // Units of a block: the walk's table is block_count() times this.
  BA_HOST_DEVICE int units_per_block() const { return units_per_block_; }

  BA_HOST_DEVICE TileCoords operator()(int unit) {
    const bool follows = unit == last_ + 1;
    if (follows && coords_.q_head + kHeadsPerUnit < p_.num_q_heads) {  // the same block's next heads
      coords_.q_head += kHeadsPerUnit;
      for (in_group_ += kHeadsPerUnit; in_group_ >= p_.group_size; in_group_ -= p_.group_size)
        ++coords_.kv_head;
    } else if (follows) {  // the next block's first heads
      const int block_index = coords_.block_index + 1;
      coords_ = {p_.schedule.blocks[block_index], 0, 0, block_index};
      in_group_ = 0;
    } else {
      const int block_index = unit / units_per_block_;
      const int q_head = (unit - block_index * units_per_block_) * kHeadsPerUnit;
      const int kv_head = q_head / p_.group_size;
      coords_ = {p_.schedule.blocks[block_index], q_head, kv_head, block_index};
      in_group_ = q_head - kv_head * p_.group_size;
    }
    last_ = unit;
    return coords_;
  }

 private:
  const AttentionParams& p_;
  int units_per_block_;
  TileCoords coords_{};
  int last_ = -2;     // no unit yet: the first call jumps
  int in_group_ = 0;  // coords_.q_head's place in its KV group
};

// The same walker's coordinates by a division and a table read per tile,
// with QueryHeadCursor's interface: what the sm_90 rotary kernels keep. Not
// bound by their producer, they ran 1.5-2% slower with the cursor on an
// H100 (rotary forward at headline-d128 2.67 -> 2.71 ms, backward at
// headline-d64 4.73 -> 4.81; docs/perf.md, "Session 38"), for a reason not
// found.
class QueryHeadLookup {
 public:
  BA_HOST_DEVICE explicit QueryHeadLookup(const AttentionParams& p) : p_(p) {}
  BA_HOST_DEVICE int units_per_block() const { return p_.num_q_heads; }
  BA_HOST_DEVICE TileCoords operator()(int tile) const { return TileCoords::per_query_head(p_, tile); }

 private:
  const AttentionParams& p_;
};

// The walk of a kernel with hook set F, kHeadsPerUnit query heads a unit.
template <core::Fusion F, int kHeadsPerUnit = 1>
using QueryHeadWalk = std::conditional_t<F == core::Fusion::kNone, QueryHeadCursor<kHeadsPerUnit>, QueryHeadLookup>;

// The KV head of query head t.q_head + 1: the next one where t.q_head is the
// last query head of its group (a multiplication, where the division
// (t.q_head + 1) / group_size would be some 20 instructions).
BA_HOST_DEVICE int kv_head_after(const TileCoords& t, int group_size) {
  return t.q_head + 1 == (t.kv_head + 1) * group_size ? t.kv_head + 1 : t.kv_head;
}

template <typename T>
BA_HOST_DEVICE const T* head_rows(const TensorView& t, const schedule::BlockDesc& b, int head) {
  return static_cast<const T*>(t.data) + b.row_begin * t.token_stride + head * t.head_stride;
}
template <typename T>
BA_HOST_DEVICE T* head_rows_out(const TensorView& t, const schedule::BlockDesc& b, int head) {
  return static_cast<T*>(t.data) + b.row_begin * t.token_stride + head * t.head_stride;
}

}  // namespace blockattn::tile
