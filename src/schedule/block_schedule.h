// The block schedule: the list of attention blocks (block_size tokens each,
// the last of a sequence shorter) of a jagged batch, and a second list where
// runs of short sequences share tiles (the backward's), built on the device
// from the offsets so the host never waits for them. The lowest layer of the
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

// One entry of a schedule table: rows [row_begin, row_begin + row_count),
// row_count <= block_size, holding one attention block, or, packed, several
// whole sequences that are each shorter than a block (bit r of
// segment_starts set: row r starts one; bit 0 always). A row attends to the
// rows of its own segment only; an unpacked entry is one segment. In the
// tiles table, the entry of a short sequence packed into an earlier one's
// tile is empty (row_count 0): kernels skip it.
struct BlockDesc {
  int32_t row_begin;
  int32_t row_count;
  uint64_t segment_starts = 1;
};

// Sequences shorter than a block are packed into shared tiles when blocks
// have at most this many rows (one bit per row in segment_starts).
inline constexpr int32_t kMaxPackedBlockSize = 64;
// Packing is greedy within aligned groups of this many sequences (one warp
// of the schedule kernel walks a group); a tile never spans two groups.
inline constexpr int32_t kPackGroup = 32;

// Where a block sits in its sequence: the sequence's index and the position of
// the block's first row within it (for a packed tile: its first sequence,
// position 0; segment k is sequence seq + k). A table parallel to the
// BlockDesc table, read only by kernels that need token positions (rotary),
// so the others load no more than before.
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

// Whether a sequence of `length` tokens is short enough to share a tile.
BA_HOST_DEVICE bool is_packable(int32_t length, int32_t block_size) {
  return block_size <= kMaxPackedBlockSize && length > 0 && length < block_size;
}

// Short blocks. Where blocks are larger than kShortBlockRows, a block of at
// most that many rows (a sequence's last one, or a whole short sequence) is
// the same attention as at block size kShortBlockRows, whose kernels pack
// such blocks and keep a tile per block's rows; the larger blocks' kernels
// spend a whole tile on it (at 128-token blocks with every sequence shorter
// than 64 tokens, 30% of copy forward and 16% backward on an H200, against
// 90% and 85% at 64: docs/perf.md, "Session 52"). A schedule that splits
// them off (the host's choice, where the build has kernels for the smaller
// block size: core::splits_short_blocks) keeps the larger blocks in its
// blocks and tiles tables and gives the short ones tables of their own.
// Those hold an entry only for each sequence that has a short block, in
// sequence order: an entry per sequence, most of them empty where
// sequences are long, cost the 64-token kernels a walk of 12-23 us forward
// and 6-40 us backward with no short block at all (H200, 1152 sequences;
// docs/perf.md, "Session 53").
inline constexpr int32_t kShortBlockRows = kMaxPackedBlockSize;

// The rows of a sequence's block that a split schedule gives the short
// tables: its last block's where that has at most kShortBlockRows of
// block_size > kShortBlockRows rows, else 0.
BA_HOST_DEVICE int32_t short_tail_rows(int32_t length, int32_t block_size) {
  if (block_size <= kShortBlockRows || length <= 0) return 0;
  const int32_t last = length - (length - 1) / block_size * block_size;
  return last <= kShortBlockRows ? last : 0;
}

// The entries a sequence has in each short table of a split schedule: 1
// where it has a block of at most kShortBlockRows rows, else 0 (and 0 in any
// schedule that does not split).
BA_HOST_DEVICE int32_t short_entries(int32_t length, int32_t block_size, bool split) {
  return split && short_tail_rows(length, block_size) > 0 ? 1 : 0;
}

// The entries a sequence has in the blocks and tiles tables: all its blocks,
// or those the short tables do not take.
BA_HOST_DEVICE int32_t scheduled_blocks(int32_t length, int32_t block_size, bool split) {
  return blocks_in_sequence(length, block_size) - short_entries(length, block_size, split);
}

// Bit arithmetic on segment_starts, the same on host and device.
BA_HOST_DEVICE int highest_bit(uint64_t x) {  // x != 0
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(x));
#else
  return 63 - __builtin_clzll(x);
#endif
}
BA_HOST_DEVICE int lowest_bit(uint64_t x) {  // x != 0
#if defined(__CUDA_ARCH__)
  return __ffsll(static_cast<long long>(x)) - 1;
#else
  return __builtin_ctzll(x);
#endif
}
BA_HOST_DEVICE int bit_count(uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __popcll(x);
#else
  return __builtin_popcountll(x);
#endif
}
// The segment starts at or before row `row` (< 64).
BA_HOST_DEVICE uint64_t starts_up_to(uint64_t segment_starts, int row) {
  return segment_starts & (~uint64_t{0} >> (63 - row));
}

// The segment of row `row` (< 64) of a packed tile: its first row, and how
// many segments start before it.
BA_HOST_DEVICE int32_t segment_first_row(uint64_t segment_starts, int row) {
  return highest_bit(starts_up_to(segment_starts, row));
}
BA_HOST_DEVICE int32_t segment_index(uint64_t segment_starts, int row) {
  return bit_count(starts_up_to(segment_starts, row)) - 1;
}

// One past the last row of that segment: the next segment's first row, or
// row_count for the last one.
BA_HOST_DEVICE int32_t segment_end_row(uint64_t segment_starts, int row, int32_t row_count) {
  const uint64_t above = row >= 63 ? 0 : segment_starts >> (row + 1);
  return above == 0 ? row_count : row + 1 + lowest_bit(above);
}

// Upper bound on the number of blocks for any offsets content (S = block_size):
// sum_b ceil(len_b / S) <= (sum_b len_b + (S - 1) B) / S <= (T + (S - 1) B) / S.
BA_HOST_DEVICE int64_t max_blocks(int64_t num_seqs, int64_t total_tokens, int32_t block_size) {
  return (total_tokens + (block_size - 1) * num_seqs) / block_size;
}

// The counters of tile_claims.cuh's ClaimedWalk: the next tile to claim
// (past the static ones) and the CTAs done claiming. Zero between kernels.
struct TileClaims {
  int32_t next;
  int32_t finished;
};

// The workspace header the schedule kernels write: the entry count of its
// blocks and tiles tables, the sizes they were built for, whether short
// blocks were split off and the entry count of each short table then, and
// the claim counters (zeroed). A call that reuses a schedule (built by an
// earlier call, e.g. the forward before a backward) checks the sizes and the
// split on the device.
struct ScheduleHeader {
  int32_t block_count;  // entries of the blocks and of the tiles table
  int32_t num_seqs;
  int32_t total_tokens;
  int32_t block_size;
  TileClaims claims;
  int32_t split;        // 1: the short tables hold the blocks of at most kShortBlockRows rows
  int32_t short_count;  // entries of each short table: the sequences that have such a block
};

// Which table pair of the workspace a kernel walks.
enum class ScheduleTable {
  kBlocks,       // every block (a split schedule's: those of more than kShortBlockRows rows)
  kTiles,        // the same, short sequences packed into shared tiles (block sizes up to kMaxPackedBlockSize)
  kShortBlocks,  // a split schedule's short blocks, a sequence's at most, in sequence order
  kShortTiles,   // the same, runs of short sequences packed into shared tiles of kShortBlockRows rows
};

// What the kernels read: the header and one of its tables (with the parallel
// BlockSeq table), written by the schedule kernel earlier on the same stream,
// and the sizes this call expects.
struct Schedule {
  const ScheduleHeader* header;
  const BlockDesc* blocks;
  const BlockSeq* block_seqs;
  int32_t num_seqs, total_tokens, block_size;
  int32_t split;        // the header's split this call expects
  int32_t short_table;  // 1: blocks is a short table (the header's short_count entries)
  TileClaims* claims;   // the header's, for kernels that claim their tiles

  // The entries to process: the header's count when the table was built for
  // this call's sizes and split, else none. A reused schedule of another
  // problem could name rows outside this call's tensors; it is ignored
  // instead (outputs are left untouched). Same sizes but other offsets
  // content stays in bounds: the table only names rows in [0, total_tokens).
  // (Written branch-free: with `&&` ptxas allocated the sm80 backward's
  // registers differently and doubled its spills, docs/perf.md.)
  BA_HOST_DEVICE int32_t block_count() const {
    const ScheduleHeader h = *header;
    const int32_t differs =
        (h.num_seqs ^ num_seqs) | (h.total_tokens ^ total_tokens) | (h.block_size ^ block_size) | (h.split ^ split);
    return differs == 0 ? (short_table != 0 ? h.short_count : h.block_count) : 0;
  }
};

// The first pass splits the sequences into at most this many ranges, one
// CTA each (block_schedule.cu), each walked in chunks of sequences: one
// narrow chunk a range up to kMaxSequenceRanges of them, whole wide chunks
// a range past that.
inline constexpr int32_t kMaxSequenceRanges = 128;
inline constexpr int32_t kNarrowChunkSeqs = 1024, kWideChunkSeqs = 8192;

// How the first pass splits the sequences: `count` ranges of `length`
// sequences (the last one shorter, none empty but where there are no
// sequences at all), a multiple of kPackGroup so that no packing group of
// the second pass spans two ranges (checked by tests/cpu/schedule_test.cpp).
struct SequenceRanges {
  int32_t count, length;
  bool wide;  // walked in wide chunks
};
inline SequenceRanges sequence_ranges(int32_t num_seqs) {
  const int64_t narrow_ranges = (int64_t{num_seqs} + kNarrowChunkSeqs - 1) / kNarrowChunkSeqs;
  if (narrow_ranges <= kMaxSequenceRanges)
    return {static_cast<int32_t>(narrow_ranges < 1 ? 1 : narrow_ranges), kNarrowChunkSeqs, false};
  const int64_t per_range = (int64_t{num_seqs} + kMaxSequenceRanges - 1) / kMaxSequenceRanges;
  const int64_t length = (per_range + kWideChunkSeqs - 1) / kWideChunkSeqs * kWideChunkSeqs;
  return {static_cast<int32_t>((num_seqs + length - 1) / length), static_cast<int32_t>(length), true};
}

// Per-sequence results of the schedule's first pass, which its second pass
// reads: the sanitized start of every sequence and one past the last, each
// sequence's first block counted from its range's first, and each range's
// block count (a range's first block is the sum of the earlier ranges');
// for a split schedule the same of the short tables' entries, per packing
// group (the group's warp ranks its own sequences).
struct SequenceTables {
  int32_t* begin;              // [num_seqs + 1]
  int32_t* first_block;        // [num_seqs + 1], within the sequence's range
  int32_t* range_blocks;       // [kMaxSequenceRanges]
  int32_t* group_first_short;  // [packing groups], within the group's range
  int32_t* range_shorts;       // [kMaxSequenceRanges]
};

// Workspace layout: the 32-byte header, then two (BlockDesc, BlockSeq) table
// pairs: the blocks (what the forward kernels take) and the tiles (short
// sequences packed, what the backward kernels take; entry j of both belongs
// to the same sequence), each sized for the smallest block size the caller
// may use (`capacity` entries: the tables' places depend only on num_seqs
// and T); then the two short table pairs of a split schedule (room for
// num_seqs entries each); then the SequenceTables.
struct WorkspaceLayout {
  static constexpr size_t kHeaderBytes = 32;
  static_assert(sizeof(ScheduleHeader) == kHeaderBytes, "the tables start 16-byte aligned");
  static_assert(sizeof(BlockDesc) == 16 && sizeof(BlockSeq) == 8, "entries keep the tables 8-byte aligned");
  static constexpr size_t kPairBytes = sizeof(BlockDesc) + sizeof(BlockSeq);
  static size_t capacity(int64_t num_seqs, int64_t total_tokens, int32_t smallest_block_size) {
    return static_cast<size_t>(max_blocks(num_seqs, total_tokens, smallest_block_size));
  }
  static size_t bytes(size_t capacity, int64_t num_seqs) {
    const auto n = static_cast<size_t>(num_seqs);
    return kHeaderBytes + 2 * kPairBytes * capacity + 2 * kPairBytes * n +
           sizeof(int32_t) * (2 * n + 2 + packing_groups(num_seqs) + 2 * kMaxSequenceRanges);
  }
  static size_t packing_groups(int64_t num_seqs) {
    return static_cast<size_t>((num_seqs + kPackGroup - 1) / kPackGroup);
  }
  // What a kernel reads: the forward kernels the blocks, the backward kernels
  // the packed tiles; where the schedule splits, the kernels of the smaller
  // block size one of the short tables.
  static Schedule schedule(void* workspace, size_t capacity, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                           bool split, ScheduleTable which) {
    const BlockDesc* blocks = nullptr;
    const BlockSeq* seqs = nullptr;
    switch (which) {
      case ScheduleTable::kBlocks:
        blocks = table(workspace), seqs = seq_table(workspace, capacity);
        break;
      case ScheduleTable::kTiles:
        blocks = tile_table(workspace, capacity), seqs = tile_seq_table(workspace, capacity);
        break;
      case ScheduleTable::kShortBlocks:
        blocks = short_table(workspace, capacity), seqs = short_seq_table(workspace, capacity, num_seqs);
        break;
      case ScheduleTable::kShortTiles:
        blocks = short_tile_table(workspace, capacity, num_seqs);
        seqs = short_tile_seq_table(workspace, capacity, num_seqs);
        break;
    }
    const bool per_sequence = which == ScheduleTable::kShortBlocks || which == ScheduleTable::kShortTiles;
    const int32_t split_word = split ? 1 : 0, short_table_word = per_sequence ? 1 : 0;
    return {header(workspace),         blocks, seqs, num_seqs, total_tokens, block_size, split_word, short_table_word,
            &header(workspace)->claims};
  }
  static ScheduleHeader* header(void* workspace) { return static_cast<ScheduleHeader*>(workspace); }
  static BlockDesc* table(void* workspace) {
    return reinterpret_cast<BlockDesc*>(static_cast<char*>(workspace) + kHeaderBytes);
  }
  static BlockSeq* seq_table(void* workspace, size_t capacity) {
    return reinterpret_cast<BlockSeq*>(table(workspace) + capacity);
  }
  static BlockDesc* tile_table(void* workspace, size_t capacity) {
    return reinterpret_cast<BlockDesc*>(seq_table(workspace, capacity) + capacity);
  }
  static BlockSeq* tile_seq_table(void* workspace, size_t capacity) {
    return reinterpret_cast<BlockSeq*>(tile_table(workspace, capacity) + capacity);
  }
  static BlockDesc* short_table(void* workspace, size_t capacity) {
    return reinterpret_cast<BlockDesc*>(tile_seq_table(workspace, capacity) + capacity);
  }
  static BlockSeq* short_seq_table(void* workspace, size_t capacity, int32_t num_seqs) {
    return reinterpret_cast<BlockSeq*>(short_table(workspace, capacity) + num_seqs);
  }
  static BlockDesc* short_tile_table(void* workspace, size_t capacity, int32_t num_seqs) {
    return reinterpret_cast<BlockDesc*>(short_seq_table(workspace, capacity, num_seqs) + num_seqs);
  }
  static BlockSeq* short_tile_seq_table(void* workspace, size_t capacity, int32_t num_seqs) {
    return reinterpret_cast<BlockSeq*>(short_tile_table(workspace, capacity, num_seqs) + num_seqs);
  }
  static SequenceTables sequence_tables(void* workspace, size_t capacity, int32_t num_seqs) {
    int32_t* begin = reinterpret_cast<int32_t*>(short_tile_seq_table(workspace, capacity, num_seqs) + num_seqs);
    int32_t* range_blocks = begin + 2 * (num_seqs + 1);
    int32_t* group_first_short = range_blocks + kMaxSequenceRanges;
    return {begin, begin + num_seqs + 1, range_blocks, group_first_short, group_first_short + packing_groups(num_seqs)};
  }
};

// Batches of up to this many sequences get their schedule from one kernel
// (every CTA scans all their offsets in shared memory); larger ones from the
// two passes above.
inline constexpr int32_t kOnePassSeqs = 4096;

// Enqueues the kernel or kernels that write the header, the four entry
// tables (and the four short ones where `split`: only for block sizes over
// kShortBlockRows) and, for batches over kOnePassSeqs, the per-sequence
// tables into `workspace`, laid out for `capacity` blocks (WorkspaceLayout). With
// `overlap` (allowed only where schedule_overlaps_its_neighbours()), each
// is launched overlapping the kernel before it on the stream.
cudaError_t build_block_schedule(const int32_t* offsets, int32_t num_seqs, int32_t total_tokens, int32_t block_size,
                                 bool split, void* workspace, size_t capacity, cudaStream_t stream, bool overlap);

// Whether, on the current device, the runtime picked the schedule kernels'
// sm_90a code, which waits for the kernel before it and lets the next one
// start early (programmatic_launch.cuh): then they may be launched
// overlapping the kernel before them, and the attention kernel behind them
// starts its CTAs before they complete. A runtime query for each kernel:
// callers keep the answer (core::schedule_overlaps_prior_kernels). The GPU
// tests check it on Hopper, so a build that loses the overlap fails there
// instead of only running slower.
bool schedule_overlaps_its_neighbours();

}  // namespace blockattn::schedule
