// Builds the block table on the device in one small single-CTA kernel: it walks
// the sequences in chunks of kThreads, sanitizes the offsets (running max,
// clamped), scans the per-sequence block counts and then fills the chunk's
// table entries with all threads, each finding its sequence by binary search in
// shared memory. Cost: a few microseconds for the headline batches.
#include "schedule/block_schedule.h"

#include <cub/block/block_scan.cuh>

namespace blockattn::schedule {
namespace {

constexpr int kThreads = 1024;

struct MaxOp {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

__global__ void __launch_bounds__(kThreads)
    build_block_schedule_kernel(const int32_t* __restrict__ offsets, int32_t num_seqs, int32_t total_tokens,
                                int32_t block_size, ScheduleHeader* __restrict__ header, BlockDesc* __restrict__ table,
                                BlockSeq* __restrict__ seq_table) {
  using Scan = cub::BlockScan<int32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int32_t seq_begin[kThreads + 1];    // M_b for the chunk, plus one past
  __shared__ int32_t first_block[kThreads + 1];  // chunk-relative first block of each sequence
  __shared__ int32_t carry[2];                   // running max offset, running block count

  const int tid = threadIdx.x;
  if (tid == 0) {
    carry[0] = num_seqs > 0 ? clamp_offset(offsets[0], total_tokens) : 0;
    carry[1] = 0;
  }
  __syncthreads();

  for (int32_t chunk = 0; chunk < num_seqs; chunk += kThreads) {
    const int32_t b = chunk + tid;
    const int32_t running_max = carry[0];
    const int32_t blocks_before = carry[1];

    // M_{b+1}: inclusive max-scan of the clamped offsets, seeded with the carry.
    int32_t end = b < num_seqs ? clamp_offset(offsets[b + 1], total_tokens) : 0;
    end = end > running_max ? end : running_max;
    Scan(scan_storage).InclusiveScan(end, end, MaxOp());
    seq_begin[tid + 1] = end;
    if (tid == 0) seq_begin[0] = running_max;
    __syncthreads();

    const int32_t length = end - seq_begin[tid];
    int32_t nblocks = b < num_seqs ? blocks_in_sequence(length, block_size) : 0;
    int32_t first = 0, chunk_blocks = 0;
    Scan(scan_storage).ExclusiveSum(nblocks, first, chunk_blocks);
    first_block[tid] = first;
    if (tid == 0) first_block[kThreads] = chunk_blocks;
    __syncthreads();

    // Fill this chunk's table entries: block j belongs to the last sequence s
    // whose first block is <= j (empty sequences share the next one's first
    // block, so "last" skips them).
    for (int32_t j = tid; j < chunk_blocks; j += kThreads) {
      int lo = 0, hi = kThreads;  // first_block[lo] <= j < first_block[hi]
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (first_block[mid] <= j)
          lo = mid;
        else
          hi = mid;
      }
      const int32_t first_pos = (j - first_block[lo]) * block_size;
      const int32_t row_begin = seq_begin[lo] + first_pos;
      const int32_t rows_left = seq_begin[lo + 1] - row_begin;
      table[blocks_before + j] = {row_begin, rows_left < block_size ? rows_left : block_size};
      seq_table[blocks_before + j] = {chunk + lo, first_pos};
    }
    __syncthreads();  // every thread has read the carry and the chunk arrays
    if (tid == 0) {
      carry[0] = seq_begin[kThreads];
      carry[1] = blocks_before + chunk_blocks;
    }
    __syncthreads();
  }
  if (tid == 0) *header = {carry[1], num_seqs, total_tokens, block_size};
}

}  // namespace

cudaError_t build_block_schedule(const int32_t* offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                                 void* workspace, size_t capacity, cudaStream_t stream) {
  build_block_schedule_kernel<<<1, kThreads, 0, stream>>>(
      offsets, num_seqs, total_tokens, block_size, WorkspaceLayout::header(workspace),
      WorkspaceLayout::table(workspace), WorkspaceLayout::seq_table(workspace, capacity));
  return cudaGetLastError();
}

}  // namespace blockattn::schedule
