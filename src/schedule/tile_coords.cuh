// Where a forward tile lives: tiles run block-major over the query heads, so
// the query heads of one KV group are neighbours and find K and V in L2.
#pragma once

#include "schedule/block_schedule.h"

namespace blockattn::schedule {

struct ForwardTileCoords {
  BlockDesc block;
  int q_head, kv_head;

  __device__ static ForwardTileCoords at(const BlockDesc* blocks, int num_q_heads, int group_size, int tile) {
    const int block_index = tile / num_q_heads;
    const int q_head = tile - block_index * num_q_heads;
    return {blocks[block_index], q_head, q_head / group_size};
  }
};

}  // namespace blockattn::schedule
