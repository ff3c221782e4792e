// Builds the schedule on the device, so the host never waits. A batch of up
// to kOnePassSeqs sequences takes one kernel (one_pass_kernel: every CTA
// scans the whole batch's offsets in shared memory, then writes its groups'
// entries as pass 2 below does); a larger one two:
//
//   1. per sequence, in order within each of up to kMaxSequenceRanges ranges
//      of consecutive sequences (a CTA a range, walking it a chunk at a time,
//      PassOneShape; the carry is the running max of the offsets and the
//      block count so far): sanitize the offsets (running max, clamped) and
//      scan the per-sequence block counts into the SequenceTables;
//   2. per group of kPackGroup sequences (a CTA each, over the whole GPU):
//      write the group's entries of both tables (and of the short ones, for
//      a split schedule), deciding on the way which of its short sequences
//      share a tile; and the header.
// Writing every entry from one SM is what made the earlier single-CTA
// schedule cost tens of microseconds at the headline batches; scanning every
// sequence on one SM cost 18 us at 20 000 sequences.
//
// Packing is greedy: a run of consecutive short sequences (0 < length <
// block_size) within a group is cut into tiles front to back, each taking
// sequences while they fit in block_size rows. The tiles table keeps the
// blocks table's indexing (entry j of both belongs to the same sequence), so
// packing needs no scan of its own: the first sequence's entry holds the
// packed tile, the entries of the sequences it took are left empty. A split
// schedule (block_schedule.h, "Short blocks") counts only each sequence's
// blocks of more than kShortBlockRows rows in pass 1, and scans a second
// count, of the sequences that have a short block, for the short tables'
// entries: kept per packing group, whose warp ranks its own sequences.
#include "schedule/block_schedule.h"

#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>

#include "schedule/programmatic_launch.cuh"

namespace blockattn::schedule {
namespace {

// Pass 1's shapes: a CTA walks its range (sequence_ranges()) a chunk of
// kThreads * kItems at a time, and a chunk's trip has a fixed cost (loads,
// two scans, stores, barriers: 1.3 us for the narrow chunk, 6 us for the
// wide one).
template <int kThreadsOf, int kItemsOf>
struct PassOneShape {
  static constexpr int kThreads = kThreadsOf, kItems = kItemsOf, kChunk = kThreads * kItems;
};
using NarrowChunks = PassOneShape<1024, 1>;
using WideChunks = PassOneShape<512, 16>;
static_assert(NarrowChunks::kChunk == kNarrowChunkSeqs && WideChunks::kChunk == kWideChunkSeqs,
              "the ranges' chunks are the shapes'");

constexpr int kEntryWarps = 8;  // pass 2
static_assert(kPackGroup == 32, "one warp per packing group");

struct MaxOp {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

// The running max of the clamped offsets[0..last], in thread 0: where a
// range's first sequence starts. Each range's CTA reads all the offsets
// before its own rather than waiting for the CTA before it (at 20 000
// sequences the last one reads 80 KB; at kMaxSequenceRanges wide ranges, the
// whole batch's offsets are read 64 times over, still far less than one SM
// scanning them). kLoads loads in flight a thread: a loop with one waits out
// each load's latency in turn.
template <int kThreads, typename ReduceStorage>
__device__ int32_t running_max_through(const int32_t* __restrict__ offsets, int32_t last, int32_t total_tokens,
                                       ReduceStorage& storage) {
  constexpr int kLoads = 8;
  int32_t running_max = 0;  // clamped offsets are >= 0
  for (int32_t base = 0; base <= last; base += kThreads * kLoads) {
    int32_t value[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int32_t i = base + k * kThreads + static_cast<int32_t>(threadIdx.x);
      value[k] = i <= last ? offsets[i] : 0;
    }
#pragma unroll
    for (int k = 0; k < kLoads; ++k)
      running_max = max(running_max, clamp_offset(value[k], total_tokens));
  }
  return cub::BlockReduce<int32_t, kThreads>(storage).Reduce(running_max, MaxOp());
}

// Every schedule kernel's first step. Where its code is the sm_90a pass's
// (schedule_overlaps_its_neighbours), the host launches it overlapping the
// kernel before it on the stream, so it waits for that kernel before reading
// the offsets or writing the workspace (which the kernel before may still
// read: an attention kernel of the previous call); and it lets the next
// kernel (the pass after it, or the attention kernel) place its CTAs at
// once, to wait in turn for this one (schedule/programmatic_launch.cuh).
__device__ __forceinline__ void enter_schedule_kernel() {
  let_next_grid_launch();
  wait_for_prior_grids();
}

// Pass 1: the SequenceTables, a CTA per range of `range_length` sequences.
// Each thread takes kItems consecutive sequences of a chunk, so a range of
// many sequences costs few trips through the chunk loop. Several items go
// through shared memory (cub's warp transpose): a thread's own values, read
// or written in place, put a warp's accesses 32 bytes apart, which took the
// single-CTA pass to 39 us (docs/perf.md).
template <typename Shape>
__global__ void __launch_bounds__(Shape::kThreads)
    sequence_pass_kernel(const int32_t* __restrict__ offsets, int32_t num_seqs, int32_t total_tokens,
                         int32_t block_size, bool split, int32_t range_length, SequenceTables seqs) {
  constexpr int kThreads = Shape::kThreads, kItems = Shape::kItems;
  constexpr bool kTranspose = kItems > 1;
  using Load =
      cub::BlockLoad<int32_t, kThreads, kItems, kTranspose ? cub::BLOCK_LOAD_WARP_TRANSPOSE : cub::BLOCK_LOAD_DIRECT>;
  using Store = cub::BlockStore<int32_t, kThreads, kItems,
                                kTranspose ? cub::BLOCK_STORE_WARP_TRANSPOSE : cub::BLOCK_STORE_DIRECT>;
  using Scan = cub::BlockScan<int32_t, kThreads>;
  __shared__ union {
    typename cub::BlockReduce<int32_t, kThreads>::TempStorage reduce;
    typename Load::TempStorage load;
    typename Store::TempStorage store;
    typename Scan::TempStorage scan;
  } storage;
  __shared__ int32_t carry[3];  // running max offset, blocks and short blocks of the range so far

  enter_schedule_kernel();
  const int tid = threadIdx.x;
  const int32_t range_begin = blockIdx.x * range_length;
  const int32_t range_end = num_seqs - range_begin < range_length ? num_seqs : range_begin + range_length;
  const int32_t start =
      num_seqs > 0 ? running_max_through<kThreads>(offsets, range_begin, total_tokens, storage.reduce) : 0;
  if (tid == 0) {
    carry[0] = start;
    carry[1] = carry[2] = 0;
    if (blockIdx.x == 0) seqs.begin[0] = start;
  }
  __syncthreads();  // the carry is set; storage is the loads' next

  for (int32_t chunk = range_begin; chunk < range_end; chunk += Shape::kChunk) {
    const int32_t in_chunk = range_end - chunk < Shape::kChunk ? range_end - chunk : Shape::kChunk;
    const int32_t running_max = carry[0], blocks_before = carry[1], shorts_before = carry[2];
    int32_t end[kItems], begin[kItems], nblocks[kItems], shorts[kItems];  // of sequences chunk + tid * kItems + k
    Load(storage.load).Load(offsets + chunk + 1, end, in_chunk, 0);
    __syncthreads();  // storage is the scan's next
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      end[k] = clamp_offset(end[k], total_tokens);

    // M_b (a sequence's begin): the exclusive max-scan of the clamped ends,
    // seeded with the carry; its end is the larger of that and its own offset.
    int32_t chunk_max = 0, chunk_blocks = 0, chunk_shorts = 0;
    Scan(storage.scan).ExclusiveScan(end, begin, running_max, MaxOp(), chunk_max);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      end[k] = end[k] > begin[k] ? end[k] : begin[k];
      const bool real = tid * kItems + k < in_chunk;
      nblocks[k] = real ? scheduled_blocks(end[k] - begin[k], block_size, split) : 0;
      shorts[k] = real ? short_entries(end[k] - begin[k], block_size, split) : 0;
    }
    __syncthreads();
    Scan(storage.scan).ExclusiveSum(nblocks, nblocks, chunk_blocks);  // each sequence's first block in the chunk
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      nblocks[k] += blocks_before;
    __syncthreads();
    if (split) {  // each packing group's first short entry (ranges and chunks hold whole groups)
      Scan(storage.scan).ExclusiveSum(shorts, shorts, chunk_shorts);
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int32_t s = chunk + tid * kItems + k;
        if (tid * kItems + k < in_chunk && s % kPackGroup == 0)
          seqs.group_first_short[s / kPackGroup] = shorts[k] + shorts_before;
      }
      __syncthreads();
    }
    Store(storage.store).Store(seqs.begin + chunk + 1, end, in_chunk);
    __syncthreads();
    Store(storage.store).Store(seqs.first_block + chunk, nblocks, in_chunk);
    __syncthreads();  // every thread has read the carry and is done with storage
    if (tid == 0) {
      carry[0] = chunk_max > running_max ? chunk_max : running_max;
      carry[1] = blocks_before + chunk_blocks;
      carry[2] = shorts_before + chunk_shorts;
    }
    __syncthreads();
  }
  if (tid == 0) {
    seqs.range_blocks[blockIdx.x] = carry[1];
    seqs.range_shorts[blockIdx.x] = carry[2];
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

__device__ GroupPacking pack_group(bool is_short, int32_t length, int32_t tile_rows, int lane) {
  GroupPacking mine;
  int start = -1;
  int32_t fill = 0;
  for (int i = 0; i < 32; ++i) {
    const int32_t len_i = __shfl_sync(~0u, length, i);
    const bool short_i = __shfl_sync(~0u, is_short ? 1 : 0, i) != 0;
    if (short_i && start >= 0 && fill + len_i <= tile_rows) {  // joins the open tile
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

// The entries before range `range`'s first: the earlier ranges' counts
// (range_blocks or range_shorts), summed by a warp.
__device__ int32_t sum_before_range(const int32_t* per_range, int32_t range, int lane) {
  int32_t sum = 0;
  for (int32_t r = lane; r < range; r += 32)
    sum += per_range[r];
  return __reduce_add_sync(~0u, sum);
}

// Where the entries go: both tables, each with its BlockSeq table, and the
// short ones of a split schedule.
struct EntryTables {
  BlockDesc* blocks;
  BlockSeq* block_seqs;
  BlockDesc* tiles;
  BlockSeq* tile_seqs;
  BlockDesc* short_blocks;
  BlockSeq* short_block_seqs;
  BlockDesc* short_tiles;
  BlockSeq* short_tile_seqs;
};

// A split schedule's short entries of sequence s (lane = sequence, every
// lane of the warp), where it has a block of at most kShortBlockRows rows:
// entry `first_short` + its rank among the group's sequences that have one.
// In the short tiles, runs of whole sequences of fewer rows are packed
// greedily into kShortBlockRows-row tiles, as the tiles table packs them at
// that block size (the entry of a sequence packed into an earlier one's
// tile is empty).
__device__ void write_short_entries(int32_t s, bool real, int32_t begin, int32_t length, int32_t block_size,
                                    int32_t first_short, int lane, const EntryTables& out) {
  const bool packable = is_packable(length, kShortBlockRows);
  const GroupPacking packing = pack_group(packable, length, kShortBlockRows, lane);
  const int32_t rows = real ? short_tail_rows(length, block_size) : 0, first_pos = length - rows;
  const unsigned with_short = __ballot_sync(~0u, rows > 0);
  if (rows == 0) return;
  const int32_t e = first_short + __popc(with_short & ((1u << lane) - 1));
  const BlockDesc block{begin + first_pos, rows};
  out.short_blocks[e] = block;
  out.short_block_seqs[e] = out.short_tile_seqs[e] = {s, first_pos};
  out.short_tiles[e] = !packable       ? block
                       : packing.joins ? BlockDesc{begin, 0}
                                       : BlockDesc{begin, packing.rows, packing.segment_starts};
}

// The entries of both tables for one group of kPackGroup sequences, by a
// CTA's kWarps warps: warp 0 packs the group's short sequences (lane =
// sequence) and writes their entries, or for a split schedule every
// sequence's short entries; every other sequence's blocks go to
// the warps in turn (lanes take the blocks in turn), so a long sequence is
// spread over 32 lanes and a batch of few sequences still over many warps. A
// warp per sequence (1024 threads a group) cost 10.7 us at 20 000 short
// sequences, where all but warp 0 have nothing to write. begin_of(s) and
// first_block_of(s) read the SequenceTables, wherever they are; first_short
// is the group's first entry of the short tables (split schedules).
template <int kWarps, typename BeginOf, typename FirstBlockOf>
__device__ void write_group_entries(int32_t group, int32_t num_seqs, int32_t block_size, bool split, BeginOf&& begin_of,
                                    FirstBlockOf&& first_block_of, int32_t first_short, const EntryTables& out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (warp == 0) {  // lane = sequence group + lane
    const int32_t s = group + lane;
    const bool real = s < num_seqs;
    const int32_t begin = real ? begin_of(s) : 0, length = real ? begin_of(s + 1) - begin : 0;
    if (split) {  // block_size > kMaxPackedBlockSize: nothing is packed in the blocks and tiles tables
      write_short_entries(s, real, begin, length, block_size, first_short, lane, out);
    } else {
      const bool is_short = is_packable(length, block_size);
      const GroupPacking packing = pack_group(is_short, length, block_size, lane);
      if (is_short) {  // its one block, and its tiles entry: a packed tile, or empty
        const int32_t first = first_block_of(s);
        out.blocks[first] = {begin, length};
        out.block_seqs[first] = {s, 0};
        out.tiles[first] = packing.joins ? BlockDesc{begin, 0} : BlockDesc{begin, packing.rows, packing.segment_starts};
        out.tile_seqs[first] = {s, 0};
      }
    }
  }
  // Any other sequence's blocks, the same in both tables: block_size rows
  // from its first token, the last one partial (and left to the short tables
  // where the schedule splits and it has at most kShortBlockRows). Warp w
  // takes sequences group + w, + kWarps, ..., its lanes the blocks in turn.
  const int32_t group_end = group + kPackGroup < num_seqs ? group + kPackGroup : num_seqs;
  for (int32_t s = group + warp; s < group_end; s += kWarps) {
    const int32_t begin = begin_of(s), length = begin_of(s + 1) - begin, first = first_block_of(s);
    if (is_packable(length, block_size)) continue;
    const int32_t nblocks = scheduled_blocks(length, block_size, split);
    for (int32_t j = lane; j < nblocks; j += 32) {
      const int32_t first_pos = j * block_size, rows_left = length - first_pos;
      const BlockDesc block{begin + first_pos, rows_left < block_size ? rows_left : block_size};
      out.blocks[first + j] = out.tiles[first + j] = block;
      out.block_seqs[first + j] = out.tile_seqs[first + j] = {s, first_pos};
    }
  }
}

// Pass 2: both tables' entries, a CTA of kEntryWarps warps per group of 32
// sequences (write_group_entries), each sequence's first block its range's
// first plus its own within the range. CTA 0's warp 0 also writes the
// header (pass 1's ranges know only their own block counts).
__global__ void __launch_bounds__(32 * kEntryWarps)
    entry_pass_kernel(ScheduleHeader h, SequenceRanges ranges, const SequenceTables seqs,
                      ScheduleHeader* __restrict__ header, const EntryTables out) {
  enter_schedule_kernel();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (blockIdx.x == 0 && warp == 0) {  // the header, with the entry counts and zeroed claims
    h.block_count = sum_before_range(seqs.range_blocks, ranges.count, lane);
    h.short_count = h.split != 0 ? sum_before_range(seqs.range_shorts, ranges.count, lane) : 0;
    if (lane == 0) {
      *header = h;
      seqs.first_block[h.num_seqs] = h.block_count;
    }
  }
  for (int32_t group = blockIdx.x * kPackGroup; group < h.num_seqs; group += gridDim.x * kPackGroup) {
    // Every warp: where the group's range starts in the tables.
    const int32_t range = group / ranges.length;
    const int32_t range_first = sum_before_range(seqs.range_blocks, range, lane);
    const int32_t first_short =
        h.split != 0 ? sum_before_range(seqs.range_shorts, range, lane) + seqs.group_first_short[group / kPackGroup]
                     : 0;
    write_group_entries<kEntryWarps>(
        group, h.num_seqs, h.block_size, h.split != 0, [&](int32_t s) { return seqs.begin[s]; },
        [&](int32_t s) { return range_first + seqs.first_block[s]; }, first_short, out);
  }
}

// Both passes in one kernel, for batches of up to kOnePassSeqs sequences:
// every CTA scans the whole batch's offsets itself (at most 16 KB, from L2)
// into SequenceTables of its own in shared memory, then writes its groups'
// entries as pass 2 does; CTA 0 writes the header. It saves the second
// kernel's launch and the SequenceTables' round trip through global memory:
// at the headline batches (1152 sequences) 7.3 us of kernel time where the
// two passes took 3.6 + 5.3, and one launch less for the host (H100,
// torch.profiler; docs/perf.md, "Session 40").
constexpr int kOnePassThreads = 1024, kOnePassItems = 4;
static_assert(kOnePassSeqs == kOnePassThreads * kOnePassItems, "a thread's items cover the batch");

__global__ void __launch_bounds__(kOnePassThreads)
    one_pass_kernel(const int32_t* __restrict__ offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                    bool split, ScheduleHeader* __restrict__ header, const EntryTables out) {
  enter_schedule_kernel();
  using Load = cub::BlockLoad<int32_t, kOnePassThreads, kOnePassItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<int32_t, kOnePassThreads>;
  // The load's transpose buffer is done with before the tables are written
  // (a barrier between): they share its room (48 KB of static shared memory
  // would not hold both).
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ union {
    typename Load::TempStorage load;
    struct {
      int32_t begin[kOnePassSeqs + 1], first_block[kOnePassSeqs + 1];
    } seqs;
  } storage;
  __shared__ int32_t group_first_short[kOnePassSeqs / kPackGroup];  // split schedules

  const int tid = threadIdx.x;
  const int32_t first_offset = num_seqs > 0 ? clamp_offset(offsets[0], total_tokens) : 0;
  // Of sequences tid * kItems + k:
  int32_t end[kOnePassItems], begin[kOnePassItems], nblocks[kOnePassItems], shorts[kOnePassItems];
  Load(storage.load).Load(offsets + 1, end, num_seqs, 0);
  __syncthreads();  // the transpose buffer is the tables' next
#pragma unroll
  for (int k = 0; k < kOnePassItems; ++k)
    end[k] = clamp_offset(end[k], total_tokens);
  Scan(scan_storage).ExclusiveScan(end, begin, first_offset, MaxOp());  // pass 1's M_b
#pragma unroll
  for (int k = 0; k < kOnePassItems; ++k) {
    end[k] = end[k] > begin[k] ? end[k] : begin[k];
    const bool real = tid * kOnePassItems + k < num_seqs;
    nblocks[k] = real ? scheduled_blocks(end[k] - begin[k], block_size, split) : 0;
    shorts[k] = real ? short_entries(end[k] - begin[k], block_size, split) : 0;
  }
  __syncthreads();  // scan_storage is the next scan's
  int32_t block_count = 0, short_count = 0;
  Scan(scan_storage).ExclusiveSum(nblocks, nblocks, block_count);
  if (split) {        // each packing group's first short entry
    __syncthreads();  // scan_storage is the next scan's
    Scan(scan_storage).ExclusiveSum(shorts, shorts, short_count);
#pragma unroll
    for (int k = 0; k < kOnePassItems; ++k) {
      const int32_t s = tid * kOnePassItems + k;
      if (s < num_seqs && s % kPackGroup == 0) group_first_short[s / kPackGroup] = shorts[k];
    }
  }
#pragma unroll
  for (int k = 0; k < kOnePassItems; ++k) {
    const int32_t s = tid * kOnePassItems + k;
    if (s < num_seqs) {
      storage.seqs.begin[s + 1] = end[k];
      storage.seqs.first_block[s] = nblocks[k];
    }
  }
  if (tid == 0) {
    storage.seqs.begin[0] = first_offset;
    if (blockIdx.x == 0)
      *header = {block_count, num_seqs, total_tokens, block_size, {0, 0}, split ? 1 : 0, short_count};
  }
  __syncthreads();  // the tables are whole
  constexpr int kWarps = kOnePassThreads / 32;
  for (int32_t group = blockIdx.x * kPackGroup; group < num_seqs; group += gridDim.x * kPackGroup)
    write_group_entries<kWarps>(
        group, num_seqs, block_size, split, [&](int32_t s) { return storage.seqs.begin[s]; },
        [&](int32_t s) { return storage.seqs.first_block[s]; }, split ? group_first_short[group / kPackGroup] : 0, out);
}

}  // namespace

cudaError_t build_block_schedule(const int32_t* offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                                 bool split, void* workspace, size_t capacity, cudaStream_t stream, bool overlap) {
  split = split && block_size > kShortBlockRows;
  const EntryTables out{WorkspaceLayout::table(workspace),
                        WorkspaceLayout::seq_table(workspace, capacity),
                        WorkspaceLayout::tile_table(workspace, capacity),
                        WorkspaceLayout::tile_seq_table(workspace, capacity),
                        WorkspaceLayout::short_table(workspace, capacity),
                        WorkspaceLayout::short_seq_table(workspace, capacity, num_seqs),
                        WorkspaceLayout::short_tile_table(workspace, capacity, num_seqs),
                        WorkspaceLayout::short_tile_seq_table(workspace, capacity, num_seqs)};
  // A CTA per group of 32 sequences, at most a few waves of them.
  constexpr int kMaxEntryCtas = 2048;
  const int64_t groups = (int64_t{num_seqs} + kPackGroup - 1) / kPackGroup;
  const int ctas = static_cast<int>(groups < 1 ? 1 : (groups > kMaxEntryCtas ? kMaxEntryCtas : groups));
  if (num_seqs <= kOnePassSeqs)
    return launch_after_prior_grids(overlap, one_pass_kernel, ctas, kOnePassThreads, 0, stream, offsets, num_seqs,
                                    total_tokens, block_size, split, WorkspaceLayout::header(workspace), out);
  const SequenceTables seqs = WorkspaceLayout::sequence_tables(workspace, capacity, num_seqs);
  const SequenceRanges ranges = sequence_ranges(num_seqs);
  const cudaError_t first =
      ranges.wide
          ? launch_after_prior_grids(overlap, sequence_pass_kernel<WideChunks>, ranges.count, WideChunks::kThreads, 0,
                                     stream, offsets, num_seqs, total_tokens, block_size, split, ranges.length, seqs)
          : launch_after_prior_grids(overlap, sequence_pass_kernel<NarrowChunks>, ranges.count, NarrowChunks::kThreads,
                                     0, stream, offsets, num_seqs, total_tokens, block_size, split, ranges.length,
                                     seqs);
  if (first != cudaSuccess) return first;
  const ScheduleHeader header{0, num_seqs, total_tokens, block_size, {0, 0}, split ? 1 : 0, 0};
  return launch_after_prior_grids(overlap, entry_pass_kernel, ctas, 32 * kEntryWarps, 0, stream, header, ranges, seqs,
                                  WorkspaceLayout::header(workspace), out);
}

bool schedule_overlaps_its_neighbours() {
  // One translation unit, one gencode: the runtime picks the same pass for
  // all four kernels, but each is read, so that a build that splits them
  // cannot launch one without its wait.
  return loaded_code_waits_for_prior_grids(one_pass_kernel) &&
         loaded_code_waits_for_prior_grids(sequence_pass_kernel<NarrowChunks>) &&
         loaded_code_waits_for_prior_grids(sequence_pass_kernel<WideChunks>) &&
         loaded_code_waits_for_prior_grids(entry_pass_kernel);
}

}  // namespace blockattn::schedule
