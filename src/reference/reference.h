// CPU reference of block-diagonal jagged attention, accumulating in fp64.
// Used by the tests and the benchmark's spot check, never by the library.
// Tensors are contiguous [T, H, D] arrays of double.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/block_schedule.h"

namespace blockattn::reference {

struct Problem {
  int64_t total_tokens = 0;
  int num_q_heads = 1, num_kv_heads = 1, head_dim = 64;
  int block_size = kDefaultBlockSize;
  double scale = 0.0;            // 0 = 1/sqrt(head_dim)
  std::vector<int32_t> offsets;  // [B + 1], any content (sanitized like the device)

  double softmax_scale() const;
};

// The attention blocks of the sanitized offsets (what attends to what), in
// order, and (when `seqs` is given) the parallel BlockSeq table.
std::vector<schedule::BlockDesc> block_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                                int32_t block_size = kDefaultBlockSize,
                                                std::vector<schedule::BlockSeq>* seqs = nullptr);

// The host model of the device's tiles table: block_schedule's blocks, with
// runs of consecutive sequences shorter than a block packed greedily into
// shared tiles (block sizes up to schedule::kMaxPackedBlockSize; a tile stays
// within an aligned group of schedule::kPackGroup sequences, as on the
// device). Entry j belongs to the same sequence as block j: a tile sits in
// its first sequence's entry, the others' entries are empty (row_count 0).
std::vector<schedule::BlockDesc> tile_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                               int32_t block_size = kDefaultBlockSize,
                                               std::vector<schedule::BlockSeq>* seqs = nullptr);

// The host model of a split schedule (schedule/block_schedule.h, "Short
// blocks"; block sizes over schedule::kShortBlockRows): its blocks table,
// block_schedule's blocks of more than kShortBlockRows rows; and its short
// tables, an entry for each sequence's block of at most kShortBlockRows
// rows in sequence order, with `packed` runs of whole short sequences
// packed greedily into kShortBlockRows-row tiles within each aligned group
// of schedule::kPackGroup sequences (a tile in its first sequence's entry,
// the others' empty).
std::vector<schedule::BlockDesc> split_block_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                                      int32_t block_size,
                                                      std::vector<schedule::BlockSeq>* seqs = nullptr);
std::vector<schedule::BlockDesc> short_block_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                                      int32_t block_size, bool packed,
                                                      std::vector<schedule::BlockSeq>* seqs = nullptr);

// Rotary embeddings in fp64 (blockattn::Rotary's semantics), applied to whole
// [T, H, D] tensors: the kernels' fused rotation is checked as
// rotate -> attention -> inverse rotation of the gradients.
struct RotaryTables {
  int rotary_dim = 0;
  bool half_split = true;
  bool in_sequence = true;
  int64_t num_positions = 0;
  std::vector<double> cos, sin;    // [num_positions, rotary_dim / 2]
  std::vector<int32_t> seq_start;  // [B], or empty (all 0); in_sequence only
};

// Each token's table row (possibly outside [0, num_positions): identity);
// tokens in no block get -1.
std::vector<int64_t> token_positions(const Problem& p, const RotaryTables& r);

// x [T, heads, D] <- R x (or R^T x when `transpose`), per token position.
void rotate(const Problem& p, const RotaryTables& r, int heads, bool transpose, std::vector<double>& x);

// out[i] = softmax(scale q_i K_blk^T) V_blk for every row in a block; rows in no
// block are left as they are.
void forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
             std::vector<double>& out);

// Gradients of sum(out * dout); dk, dv sum over each KV group. Rows in no block
// are left as they are.
void backward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& dout, std::vector<double>& dq,
              std::vector<double>& dk, std::vector<double>& dv);

// Brute force for valid offsets: dense attention over all T keys with a mask
// that keeps pairs in the same block of the same sequence. O(T^2).
void dense_masked_forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                          const std::vector<double>& v, std::vector<double>& out);

}  // namespace blockattn::reference
