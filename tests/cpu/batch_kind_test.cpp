// The host's rule for batches of short sequences and of a few blocks
// (core/batch_kind.h), which picks a row's kernel for them and the rows kAuto
// takes for such batches: a batch is short when its sequences average under
// one block, whatever else its shape is. And the rows kAuto also takes on devices with
// fast memory (core::DeviceTraits).
#include <gtest/gtest.h>

#include "core/batch_kind.h"
#include "core/kernel_table.h"
#include "core/problem.h"

namespace blockattn {
namespace {

// What the lent cards report (memory peak in GB/s).
constexpr core::DeviceTraits kH100{3352};
constexpr core::DeviceTraits kH200{4800};

core::Problem batch(int64_t total_tokens, int num_seqs, int block_size) {
  core::Problem p;
  p.shape.total_tokens = total_tokens;
  p.shape.num_seqs = num_seqs;
  p.shape.block_size = block_size;
  return p;
}

// A backward of the sweep's 1152 sequences in 64-token blocks.
core::Problem backward(int64_t total_tokens, int head_dim) {
  core::Problem p = batch(total_tokens, 1152, 64);
  p.operation = Operation::kBackward;
  p.shape.head_dim = head_dim;
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

// A few blocks per sequence: where a backward row has a FewBlocks kernel (the
// sm_90 backward at D = 64 and 128, 64-token blocks, no rotary), under 2.5
// and 3.5 blocks on average; everywhere else such batches are long.
TEST(BatchKind, FewBlocksWhereABackwardHasTheirKernel) {
  EXPECT_EQ(batch_kind(backward(152135, 64)), BatchKind::kFewBlocks);  // sweep-d64-L256-f0.5: 2.06 blocks
  EXPECT_EQ(batch_kind(backward(205546, 64)), BatchKind::kLong);       // sweep-d64-L256-f0.7: 2.79
  EXPECT_EQ(batch_kind(backward(205546, 128)), BatchKind::kFewBlocks);
  EXPECT_EQ(batch_kind(backward(294912, 128)), BatchKind::kLong);              // sweep-d128-L256-f1.0: 4.0
  EXPECT_EQ(batch_kind(backward(1152 * 160 - 1, 64)), BatchKind::kFewBlocks);  // the limits are strict
  EXPECT_EQ(batch_kind(backward(1152 * 160, 64)), BatchKind::kLong);
  EXPECT_EQ(batch_kind(backward(1152 * 224 - 1, 128)), BatchKind::kFewBlocks);
  EXPECT_EQ(batch_kind(backward(1152 * 224, 128)), BatchKind::kLong);
  EXPECT_EQ(batch_kind(backward(1152 * 64 - 1, 64)), BatchKind::kShort);  // short comes first
  EXPECT_EQ(batch_kind(backward(152135, 96)), BatchKind::kLong);
  core::Problem p = backward(152135, 64);
  p.operation = Operation::kForward;
  EXPECT_EQ(batch_kind(p), BatchKind::kLong);
  p = backward(152135, 64);
  p.shape.block_size = 32;  // 4.1 blocks of 32 tokens, and no kernel for them
  EXPECT_EQ(batch_kind(p), BatchKind::kLong);
  p = backward(152135, 64);
  p.rotary.rotary_dim = 64;
  EXPECT_EQ(batch_kind(p), BatchKind::kLong);
  // On fast memory (an H200) the FewBlocks kernels trail: such batches are long there.
  EXPECT_EQ(batch_kind(backward(152135, 64), kH100), BatchKind::kFewBlocks);
  EXPECT_EQ(batch_kind(backward(152135, 64), kH200), BatchKind::kLong);
  EXPECT_EQ(batch_kind(backward(1152 * 64 - 1, 64), kH200), BatchKind::kShort);
}

// Many blocks per sequence: where a backward row has a ManyBlocks kernel (the
// sm_90 backward at D = 64, 64-token blocks, no rotary), 8 blocks or more on
// average, on any memory; everywhere else such batches are long.
TEST(BatchKind, ManyBlocksWhereABackwardHasTheirKernel) {
  EXPECT_EQ(batch_kind(backward(1629975, 64)), BatchKind::kManyBlocks);        // headline-d64: 22 blocks
  EXPECT_EQ(batch_kind(backward(1152 * 8 * 64, 64)), BatchKind::kManyBlocks);  // the limit is inclusive
  EXPECT_EQ(batch_kind(backward(1152 * 8 * 64 - 1, 64)), BatchKind::kLong);
  EXPECT_EQ(batch_kind(backward(1629975, 128)), BatchKind::kLong);  // no ManyBlocks kernel at D = 128
  EXPECT_EQ(batch_kind(backward(1629975, 64), kH100), BatchKind::kManyBlocks);
  EXPECT_EQ(batch_kind(backward(1629975, 64), kH200), BatchKind::kManyBlocks);  // it leads there too
  EXPECT_EQ(batch_kind(backward(1152 * 8 * 64 - 1, 64), kH200), BatchKind::kLong);
  core::Problem p = backward(1629975, 64);
  p.operation = Operation::kForward;
  EXPECT_EQ(batch_kind(p), BatchKind::kLong);
  p = backward(1629975, 64);
  p.shape.block_size = 32;
  EXPECT_EQ(batch_kind(p), BatchKind::kLong);
  p = backward(1629975, 64);
  p.rotary.rotary_dim = 64;
  EXPECT_EQ(batch_kind(p), BatchKind::kLong);
}

TEST(BatchKind, NoProductOverflow) {
  // 2^31 - 1 sequences of 2^30 tokens would overflow a 32-bit product.
  EXPECT_EQ(batch_kind(batch(int64_t{1} << 40, 2147483647, 1 << 30)), BatchKind::kShort);
}

// Grouped query heads take a row's Grouped kernel in every backward, and in
// every forward but a short batch whose groups are under eight heads.
TEST(BatchKind, GroupedKernelsForGroupedHeads) {
  for (Operation op : {Operation::kForward, Operation::kBackward}) {
    core::Problem p = batch(643355, 20000, 64);  // tail-d64's batch: short
    p.operation = op;
    p.shape.num_q_heads = 8;
    p.shape.num_kv_heads = 8;
    EXPECT_FALSE(takes_grouped_kernel(p, batch_kind(p)));  // not grouped
    p.shape.num_kv_heads = 2;
    EXPECT_EQ(takes_grouped_kernel(p, batch_kind(p)), op == Operation::kBackward);
    p.shape.num_kv_heads = 1;
    EXPECT_TRUE(takes_grouped_kernel(p, batch_kind(p)));
    p.shape.num_q_heads = 16;
    p.shape.num_kv_heads = 2;
    EXPECT_TRUE(takes_grouped_kernel(p, batch_kind(p)));
    p.shape.num_seqs = 1152;  // the headline's sequences: long
    p.shape.num_q_heads = 4;
    EXPECT_TRUE(takes_grouped_kernel(p, batch_kind(p)));
  }
}

// The table's `short` rows reach kAuto only for short batches; `auto` rows
// for every batch. Checked on the rows this build has (the sm90 backward at
// D = 64 is the `short` one; the sm80 forward at D = 64 an `auto` one).
TEST(BatchKind, ShortRowsAreAutomaticForShortBatchesOnly) {
  core::Problem p = batch(643355, 20000, 64);
  p.operation = Operation::kBackward;
  p.shape.dtype = DType::kBF16;
  p.shape.head_dim = 64;
  const KernelConfig* row = core::find_kernel(Backend::kHopper, p);
  if (row == nullptr) GTEST_SKIP() << "this build has no sm90 bf16 backward at head_dim 64 (BLOCKATTN_HEAD_DIMS)";
  EXPECT_TRUE(row->automatic);  // the public flag: kAuto may choose it
  EXPECT_TRUE(core::automatic_for(*row, p, kH100));
  p.shape.total_tokens = 1152 * 6 * 64;  // six blocks a sequence: long, the portable kernel's on an H100
  p.shape.num_seqs = 1152;
  EXPECT_FALSE(core::automatic_for(*row, p, kH100));
  EXPECT_FALSE(core::automatic_for(*row, p, core::DeviceTraits{}));  // unknown memory reads as slow

  p.operation = Operation::kForward;
  const KernelConfig* portable = core::find_kernel(Backend::kPortable, p);
  ASSERT_NE(portable, nullptr);
  EXPECT_TRUE(core::automatic_for(*portable, p, kH100));
  p.shape.total_tokens = 643355;
  p.shape.num_seqs = 20000;
  EXPECT_TRUE(core::automatic_for(*portable, p, kH100));
}

// That row is `except-long-mha-on-slow-memory`: on a device whose memory peaks
// at 4 TB/s or more it is kAuto's for every batch, long ones included; on
// an H100 for short batches, batches of a few blocks or of many, and
// grouped-query heads.
TEST(BatchKind, FastMemoryRowsAreAutomaticForEveryBatchThere) {
  core::Problem p = batch(1152 * 6 * 64, 1152, 64);  // six blocks a sequence: long
  p.operation = Operation::kBackward;
  p.shape.dtype = DType::kBF16;
  p.shape.head_dim = 64;
  const KernelConfig* row = core::find_kernel(Backend::kHopper, p);
  if (row == nullptr) GTEST_SKIP() << "this build has no sm90 bf16 backward at head_dim 64 (BLOCKATTN_HEAD_DIMS)";
  EXPECT_FALSE(core::automatic_for(*row, p, kH100));
  EXPECT_TRUE(core::automatic_for(*row, p, kH200));
  EXPECT_TRUE(core::automatic_for(*row, p, core::DeviceTraits{core::kFastMemoryGBps}));
  EXPECT_FALSE(core::automatic_for(*row, p, core::DeviceTraits{core::kFastMemoryGBps - 1}));
  p.shape.num_q_heads = 8;  // mqa-d64-h8x1: the row's grouped kernel
  p.shape.num_kv_heads = 1;
  EXPECT_TRUE(core::automatic_for(*row, p, kH100));
  p.shape.num_q_heads = p.shape.num_kv_heads = 8;
  p.shape.total_tokens = 152135;  // sweep-d64-L256-f0.5: a few blocks
  EXPECT_TRUE(core::automatic_for(*row, p, kH100));
  p.shape.total_tokens = 205546;  // sweep-d64-L256-f0.7: 2.8 blocks, long at D = 64
  EXPECT_FALSE(core::automatic_for(*row, p, kH100));
  p.shape.total_tokens = 1629975;  // headline-d64: 22 blocks, many
  EXPECT_TRUE(core::automatic_for(*row, p, kH100));
  EXPECT_TRUE(core::automatic_for(*row, p, kH200));
  p.shape.total_tokens = 643355;  // tail-d64: short
  p.shape.num_seqs = 20000;
  EXPECT_TRUE(core::automatic_for(*row, p, kH100));
  EXPECT_TRUE(core::automatic_for(*row, p, kH200));
}

// The sm90 rotary forward at D = 128, 128-token blocks is `16-bit-tables`:
// kAuto's where the tables' rows can be staged by TMA (bf16 or fp16, rows of
// whole 16-byte units, aligned; core::rotary_rows_stageable), for every
// batch and device, and not with fp32 tables or rows TMA cannot copy.
TEST(BatchKind, SixteenBitTableRowsAreAutomaticWhereTheyCanBeStaged) {
  core::Problem p = batch(1652832, 1152, 128);  // headline-d128
  p.operation = Operation::kForward;
  p.shape.dtype = DType::kBF16;
  p.shape.head_dim = 128;
  p.rotary.rotary_dim = 128;
  alignas(16) static const uint16_t table[2 * 64 + 8] = {};
  p.rotary.cos = p.rotary.sin = table;
  p.rotary.cos_row_stride = p.rotary.sin_row_stride = 64;
  p.rotary.num_positions = 2;
  const KernelConfig* row = core::find_kernel(Backend::kHopper, p);
  if (row == nullptr)
    GTEST_SKIP() << "this build has no sm90 bf16 rotary forward at head_dim 128, block_size 128 "
                    "(BLOCKATTN_HEAD_DIMS, BLOCKATTN_BLOCK_SIZES)";
  EXPECT_TRUE(row->automatic);
  for (TableType type : {TableType::kBF16, TableType::kFP16}) {
    p.rotary.table_type = type;
    EXPECT_TRUE(core::rotary_rows_stageable(p.rotary));
    EXPECT_TRUE(core::automatic_for(*row, p, kH100));
    EXPECT_TRUE(core::automatic_for(*row, p, kH200));
  }
  auto expect_not_automatic = [&](core::Problem q, const char* why) {
    EXPECT_FALSE(core::rotary_rows_stageable(q.rotary)) << why;
    EXPECT_FALSE(core::automatic_for(*row, q, kH100)) << why;
    EXPECT_FALSE(core::automatic_for(*row, q, kH200)) << why;
  };
  core::Problem q = p;
  q.rotary.table_type = TableType::kFloat32;
  expect_not_automatic(q, "fp32 tables");
  q = p;
  q.rotary.rotary_dim = 120;  // 60 pairs a row: not whole 16-byte units
  expect_not_automatic(q, "rotary_dim 120");
  q = p;
  q.rotary.sin_row_stride = 60;
  expect_not_automatic(q, "a row stride of 120 bytes");
  q = p;
  q.rotary.cos = table + 4;
  expect_not_automatic(q, "a base 8 bytes off 16-byte alignment");
}

// The short blocks of a larger-block call (schedule/block_schedule.h,
// "Short blocks") are a batch of short sequences to every kernel choice,
// whatever the call's shape.
TEST(BatchKind, ShortBlocksAreAShortBatch) {
  core::Problem p = batch(1629975, 1152, 64);  // headline: long
  p.short_blocks = true;
  EXPECT_EQ(batch_kind(p), BatchKind::kShort);
  EXPECT_EQ(batch_kind(p, kH200), BatchKind::kShort);
}

// The schedule splits short blocks off for 128-token blocks where the build
// has 64-token kernels for both operations of the combination, and never
// for blocks that are short already.
TEST(BatchKind, ShortBlocksSplitOffAbove64TokenBlocksWhereTheirKernelsAreBuilt) {
  for (const int head_dim : {64, 128})
    for (const bool rotary : {false, true}) {
      core::Problem p = batch(1629975, 1152, 128);
      p.shape.dtype = DType::kBF16;
      p.shape.head_dim = head_dim;
      p.rotary.rotary_dim = rotary ? head_dim : 0;
      core::Problem at64 = p;
      at64.shape.block_size = 64;
      bool built = true;
      for (const Operation op : {Operation::kForward, Operation::kBackward}) {
        at64.operation = op;
        built = built && core::any_backend_has_kernel(at64);
      }
      EXPECT_EQ(core::splits_short_blocks(p), built) << "head_dim " << head_dim << (rotary ? " rotary" : "");
      EXPECT_FALSE(core::splits_short_blocks(at64));
      p.shape.block_size = 32;
      EXPECT_FALSE(core::splits_short_blocks(p));
    }
}

}  // namespace
}  // namespace blockattn
