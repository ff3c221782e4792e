// The block schedule: the list of attention blocks (block_size tokens each,
// the last of a sequence shorter) of a jagged batch, built on the device from
// the offsets so the host never waits for them. The lowest layer of the
// library: it knows the public types and nothing else.
//
// Offsets are untrusted. The schedule reads them as their running maximum
// clamped to [0, T]:  M_0 = clamp(offsets[0]),  M_b = max(M_{b-1}, clamp(offsets[b])),
// and sequence b covers rows [M_b, M_{b+1}). For valid offsets this is the
// identity; for malformed ones it yields disjoint, in-bounds, ordered
// sequences, so no kernel can touch a row outside [0, T) and no row is written
// twice. Rows outside every sanitized sequence are never written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "blockattn/blockattn.h"

#if defined(__CUDACC__)
#define BA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define BA_HOST_DEVICE inline
#endif

namespace blockattn::schedule {

// One attention block: rows [row_begin, row_begin + row_count), 1 <= row_count <= block_size.
struct BlockDesc {
  int32_t row_begin;
  int32_t row_count;
};

// Where a block sits in its sequence: the sequence's index and the position of
// the block's first row within it. A table parallel to the BlockDesc table,
// read only by kernels that need token positions (rotary), so the others load
// no more than before.
struct BlockSeq {
  int32_t seq;
  int32_t first_pos;
};

BA_HOST_DEVICE int32_t clamp_offset(int32_t offset, int32_t total_tokens) {
  return offset < 0 ? 0 : (offset > total_tokens ? total_tokens : offset);
}

BA_HOST_DEVICE int32_t blocks_in_sequence(int32_t length, int32_t block_size) {
  return (length + block_size - 1) / block_size;
}

// Upper bound on the number of blocks for any offsets content (S = block_size):
// sum_b ceil(len_b / S) <= (sum_b len_b + (S - 1) B) / S <= (T + (S - 1) B) / S.
BA_HOST_DEVICE int64_t max_blocks(int64_t num_seqs, int64_t total_tokens, int32_t block_size) {
  return (total_tokens + (block_size - 1) * num_seqs) / block_size;
}

// The workspace header the schedule kernel writes: the block count and the
// sizes the table was built for. A call that reuses a schedule (built by an
// earlier call, e.g. the forward before a backward) checks them on the device.
struct ScheduleHeader {
  int32_t block_count;
  int32_t num_seqs;
  int32_t total_tokens;
  int32_t block_size;
};

// What the kernels read: the header and the table, written by the schedule
// kernel earlier on the same stream, and the sizes this call expects.
struct Schedule {
  const ScheduleHeader* header;
  const BlockDesc* blocks;
  const BlockSeq* block_seqs;
  int32_t num_seqs, total_tokens, block_size;

  // The blocks to process: the header's count when the table was built for
  // this call's sizes, else none. A reused schedule of another problem could
  // name rows outside this call's tensors; it is ignored instead (outputs are
  // left untouched). Same sizes but other offsets content stays in bounds:
  // the table only names rows in [0, total_tokens).
  // (Written branch-free: with `&&` ptxas allocated the sm80 backward's
  // registers differently and doubled its spills, docs/perf.md.)
  BA_HOST_DEVICE int32_t block_count() const {
    const ScheduleHeader h = *header;
    const int32_t differs = (h.num_seqs ^ num_seqs) | (h.total_tokens ^ total_tokens) | (h.block_size ^ block_size);
    return differs == 0 ? h.block_count : 0;
  }
};

// Workspace layout: the 16-byte header, the BlockDesc table, then the
// BlockSeq table, each sized for the smallest block size the caller may use
// (`capacity` entries: the tables' places depend only on num_seqs and T).
struct WorkspaceLayout {
  static constexpr size_t kHeaderBytes = 16;
  static_assert(sizeof(ScheduleHeader) == kHeaderBytes, "the table starts 16-byte aligned");
  static size_t capacity(int64_t num_seqs, int64_t total_tokens, int32_t smallest_block_size) {
    return static_cast<size_t>(max_blocks(num_seqs, total_tokens, smallest_block_size));
  }
  static size_t bytes(size_t capacity) { return kHeaderBytes + (sizeof(BlockDesc) + sizeof(BlockSeq)) * capacity; }
  static Schedule schedule(void* workspace, size_t capacity, int32_t num_seqs, int32_t total_tokens,
                           int32_t block_size) {
    return {header(workspace), table(workspace), seq_table(workspace, capacity), num_seqs, total_tokens, block_size};
  }
  static ScheduleHeader* header(void* workspace) { return static_cast<ScheduleHeader*>(workspace); }
  static BlockDesc* table(void* workspace) {
    return reinterpret_cast<BlockDesc*>(static_cast<char*>(workspace) + kHeaderBytes);
  }
  static BlockSeq* seq_table(void* workspace, size_t capacity) {
    return reinterpret_cast<BlockSeq*>(table(workspace) + capacity);
  }
};

// Enqueues the kernel that writes the block count and both tables into
// `workspace`, laid out for `capacity` blocks (WorkspaceLayout).
cudaError_t build_block_schedule(const int32_t* offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                                 void* workspace, size_t capacity, cudaStream_t stream);

}  // namespace blockattn::schedule
