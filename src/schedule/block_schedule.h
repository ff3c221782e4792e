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

// What the kernels read: the block count and the table, both written by the
// schedule kernel earlier on the same stream.
struct Schedule {
  const int32_t* block_count;
  const BlockDesc* blocks;
};

// Workspace layout: a 16-byte header holding the block count, then the table,
// sized for the smallest block size the caller may use.
struct WorkspaceLayout {
  static constexpr size_t kHeaderBytes = 16;
  static size_t bytes(int64_t num_seqs, int64_t total_tokens, int32_t smallest_block_size) {
    return kHeaderBytes +
           sizeof(BlockDesc) * static_cast<size_t>(max_blocks(num_seqs, total_tokens, smallest_block_size));
  }
  static Schedule schedule(void* workspace) { return {block_count(workspace), table(workspace)}; }
  static int32_t* block_count(void* workspace) { return static_cast<int32_t*>(workspace); }
  static BlockDesc* table(void* workspace) {
    return reinterpret_cast<BlockDesc*>(static_cast<char*>(workspace) + kHeaderBytes);
  }
};

// Enqueues the kernel that writes the block count and table into `workspace`.
cudaError_t build_block_schedule(const int32_t* offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                                 void* workspace, cudaStream_t stream);

}  // namespace blockattn::schedule
