// Builds the schedule on the device in two kernels, so the host never waits:
//
//   1. per sequence, in order (one CTA walking the sequences kThreads at a
//      time; the carry is the running max of the offsets and the block count
//      so far): sanitize the offsets (running max, clamped) and scan the
//      per-sequence block counts into the SequenceTables;
//   2. per group of kPackGroup sequences (a CTA each, over the whole GPU):
//      write the group's entries of both tables, deciding on the way which
//      of its short sequences share a tile.
// Writing every entry from one SM is what made the earlier single-CTA
// schedule cost tens of microseconds at the headline batches.
//
// Packing is greedy: a run of consecutive short sequences (0 < length <
// block_size) within a group is cut into tiles front to back, each taking
// sequences while they fit in block_size rows. The tiles table keeps the
// blocks table's indexing (entry j of both belongs to the same sequence), so
// packing needs no scan of its own: the first sequence's entry holds the
// packed tile, the entries of the sequences it took are left empty.
#include "schedule/block_schedule.h"

#include <cub/block/block_scan.cuh>

namespace blockattn::schedule {
namespace {

constexpr int kThreads = 1024;
static_assert(kPackGroup == 32, "one warp per packing group");

struct MaxOp {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

// Pass 1: the SequenceTables and the header.
__global__ void __launch_bounds__(kThreads)
    sequence_pass_kernel(const int32_t* __restrict__ offsets, int32_t num_seqs, int32_t total_tokens,
                         int32_t block_size, ScheduleHeader* __restrict__ header, SequenceTables seqs) {
  using Scan = cub::BlockScan<int32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int32_t seq_begin[kThreads + 1];  // M_b for the chunk, plus one past
  __shared__ int32_t carry[2];                 // running max offset, blocks so far

  const int tid = threadIdx.x;
  if (tid == 0) {
    carry[0] = num_seqs > 0 ? clamp_offset(offsets[0], total_tokens) : 0;
    carry[1] = 0;
    seqs.begin[0] = carry[0];
  }
  __syncthreads();

  int32_t offset = tid < num_seqs ? offsets[tid + 1] : 0;  // this chunk's
  for (int32_t chunk = 0; chunk < num_seqs; chunk += kThreads) {
    const int32_t b = chunk + tid;
    const int32_t running_max = carry[0], blocks_before = carry[1];
    // The next chunk's offset, requested now so its latency hides behind this chunk.
    const int32_t next_offset = b + kThreads < num_seqs ? offsets[b + kThreads + 1] : 0;

    // M_{b+1}: inclusive max-scan of the clamped offsets, seeded with the carry.
    int32_t end = b < num_seqs ? clamp_offset(offset, total_tokens) : 0;
    end = end > running_max ? end : running_max;
    Scan(scan_storage).InclusiveScan(end, end, MaxOp());
    seq_begin[tid + 1] = end;
    if (tid == 0) seq_begin[0] = running_max;
    __syncthreads();

    const int32_t nblocks = b < num_seqs ? blocks_in_sequence(end - seq_begin[tid], block_size) : 0;
    int32_t first_block = 0, chunk_blocks = 0;
    Scan(scan_storage).ExclusiveSum(nblocks, first_block, chunk_blocks);
    if (b < num_seqs) {
      seqs.begin[b + 1] = end;
      seqs.first_block[b] = blocks_before + first_block;
    }
    __syncthreads();  // every thread has read the carry and seq_begin
    if (tid == 0) {
      carry[0] = seq_begin[kThreads];
      carry[1] = blocks_before + chunk_blocks;
    }
    offset = next_offset;
    __syncthreads();
  }
  if (tid == 0) {
    seqs.first_block[num_seqs] = carry[1];
    *header = {carry[1], num_seqs, total_tokens, block_size, {0, 0, 0, 0}};
  }
}

// The greedy packing of a warp's group, lane = sequence: every lane walks the
// group's 32 lengths in order (warp-uniform state, shuffles) and keeps its
// own sequence's part. A lane whose sequence starts a packed tile gets the
// tile's rows and segment starts; one whose sequence joins an earlier tile
// gets joins = true.
struct GroupPacking {
  bool joins = false;
  int32_t rows = 0;
  uint64_t segment_starts = 0;
};

__device__ GroupPacking pack_group(bool is_short, int32_t length, int32_t block_size, int lane) {
  GroupPacking mine;
  int start = -1;
  int32_t fill = 0;
  for (int i = 0; i < 32; ++i) {
    const int32_t len_i = __shfl_sync(~0u, length, i);
    const bool short_i = __shfl_sync(~0u, is_short ? 1 : 0, i) != 0;
    if (short_i && start >= 0 && fill + len_i <= block_size) {  // joins the open tile
      if (start == lane) mine.segment_starts |= uint64_t{1} << fill;
      if (i == lane) mine.joins = true;
      fill += len_i;
    } else {
      if (start == lane) mine.rows = fill;  // the tile this lane started is closed
      start = short_i ? i : -1;
      fill = short_i ? len_i : 0;
      if (short_i && i == lane) mine.segment_starts = 1;
    }
  }
  if (start == lane) mine.rows = fill;
  return mine;
}

// Pass 2: both tables' entries, a CTA per group of 32 sequences: warp 0
// packs the group's short sequences (lane = sequence) and writes their
// entries; warp w writes sequence group + w's blocks otherwise (lanes take
// them in turn), so a long sequence is spread over 32 lanes and a batch of
// few sequences still over many warps.
__global__ void __launch_bounds__(32 * kPackGroup)
    entry_pass_kernel(const ScheduleHeader* __restrict__ header, const SequenceTables seqs,
                      BlockDesc* __restrict__ blocks, BlockSeq* __restrict__ block_seqs,
                      BlockDesc* __restrict__ tiles, BlockSeq* __restrict__ tile_seqs) {
  const ScheduleHeader h = *header;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int32_t group = blockIdx.x * kPackGroup; group < h.num_seqs; group += gridDim.x * kPackGroup) {
    if (warp == 0) {  // lane = sequence group + lane
      const int32_t s = group + lane;
      const bool real = s < h.num_seqs;
      const int32_t begin = real ? seqs.begin[s] : 0, length = real ? seqs.begin[s + 1] - begin : 0;
      const bool is_short = is_packable(length, h.block_size);
      const GroupPacking packing = pack_group(is_short, length, h.block_size, lane);
      if (is_short) {  // its one block, and its tiles entry: a packed tile, or empty
        const int32_t first = seqs.first_block[s];
        blocks[first] = {begin, length};
        block_seqs[first] = {s, 0};
        tiles[first] = packing.joins ? BlockDesc{begin, 0} : BlockDesc{begin, packing.rows, packing.segment_starts};
        tile_seqs[first] = {s, 0};
      }
    }
    // Any other sequence's blocks, the same in both tables: block_size rows
    // from its first token, the last one partial. Warp w takes sequence
    // group + w, its lanes the blocks in turn.
    const int32_t s = group + warp;
    if (s < h.num_seqs) {
      const int32_t begin = seqs.begin[s], length = seqs.begin[s + 1] - begin, first = seqs.first_block[s];
      if (!is_packable(length, h.block_size)) {
        const int32_t nblocks = blocks_in_sequence(length, h.block_size);
        for (int32_t j = lane; j < nblocks; j += 32) {
          const int32_t first_pos = j * h.block_size, rows_left = length - first_pos;
          const BlockDesc block{begin + first_pos, rows_left < h.block_size ? rows_left : h.block_size};
          blocks[first + j] = tiles[first + j] = block;
          block_seqs[first + j] = tile_seqs[first + j] = {s, first_pos};
        }
      }
    }
  }
}

}  // namespace

cudaError_t build_block_schedule(const int32_t* offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                                 void* workspace, size_t capacity, cudaStream_t stream) {
  const SequenceTables seqs = WorkspaceLayout::sequence_tables(workspace, capacity, num_seqs);
  sequence_pass_kernel<<<1, kThreads, 0, stream>>>(offsets, num_seqs, total_tokens, block_size,
                                                   WorkspaceLayout::header(workspace), seqs);
  // A CTA per group of 32 sequences, at most a few waves of them.
  constexpr int kMaxEntryCtas = 2048;
  const int64_t groups = (int64_t{num_seqs} + kPackGroup - 1) / kPackGroup;
  const int ctas = static_cast<int>(groups < 1 ? 1 : (groups > kMaxEntryCtas ? kMaxEntryCtas : groups));
  entry_pass_kernel<<<ctas, 32 * kPackGroup, 0, stream>>>(
      WorkspaceLayout::header(workspace), seqs, WorkspaceLayout::table(workspace),
      WorkspaceLayout::seq_table(workspace, capacity), WorkspaceLayout::tile_table(workspace, capacity),
      WorkspaceLayout::tile_seq_table(workspace, capacity));
  return cudaGetLastError();
}

}  // namespace blockattn::schedule
