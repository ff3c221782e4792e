// The host's rule for batches of short sequences (core/batch_kind.h), which
// picks a row's short-sequence kernel and the rows kAuto takes for such
// batches: a batch is short when its sequences average under one block,
// whatever else its shape is.
#include <gtest/gtest.h>

#include "core/batch_kind.h"
#include "core/problem.h"

namespace blockattn {
namespace {

core::Problem batch(int64_t total_tokens, int num_seqs, int block_size) {
  core::Problem p;
  p.shape.total_tokens = total_tokens;
  p.shape.num_seqs = num_seqs;
  p.shape.block_size = block_size;
  return p;
}

TEST(BatchKind, ShortWhenSequencesAverageUnderOneBlock) {
  EXPECT_EQ(batch_kind(batch(643355, 20000, 64)), BatchKind::kShort);  // tail-d64: 32 tokens a sequence
  EXPECT_EQ(batch_kind(batch(1629975, 1152, 64)), BatchKind::kLong);   // headline: 1,415
  EXPECT_EQ(batch_kind(batch(152135, 1152, 64)), BatchKind::kLong);    // sweep-d64-L256-f0.5: 132
}

TEST(BatchKind, OneBlockOnAverageIsLong) {
  EXPECT_EQ(batch_kind(batch(64 * 10, 10, 64)), BatchKind::kLong);
  EXPECT_EQ(batch_kind(batch(64 * 10 - 1, 10, 64)), BatchKind::kShort);
  EXPECT_EQ(batch_kind(batch(128 * 10 - 1, 10, 128)), BatchKind::kShort);  // the block size counts
  EXPECT_EQ(batch_kind(batch(128 * 10 - 1, 10, 64)), BatchKind::kLong);
}

TEST(BatchKind, NoProductOverflow) {
  // 2^31 - 1 sequences of 2^30 tokens would overflow a 32-bit product.
  EXPECT_EQ(batch_kind(batch(int64_t{1} << 40, 2147483647, 1 << 30)), BatchKind::kShort);
}

}  // namespace
}  // namespace blockattn
