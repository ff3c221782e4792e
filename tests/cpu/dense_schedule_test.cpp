// The dense forward's row blocks and key tiles (tile/dense_units.h,
// common/dense_params.h), as every consumer warpgroup of the sm90 kernel sees
// them: over the blocks of a head, every query row in [0, S) belongs to
// exactly one warpgroup's 64 rows; a warpgroup whose rows lie before row 0
// (a causal block 0 shifted there) or past S sees no key tile; the others see
// exactly the key tiles their rows reach, with the mask skipped only on tiles
// every one of their rows sees whole; and under the mask, the partial block
// is block 0, so no later block leaves a whole warpgroup idle.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/dense_params.h"
#include "tile/dense_units.h"

namespace blockattn {
namespace {

constexpr int kWarpgroupRows = 64;

DenseAttnParams params_of(int64_t seq_len, bool causal, int rows_per_unit, int shift_step) {
  DenseForwardArgs args;
  args.shape = {1, seq_len, 1, 1, 64, DType::kBF16};
  args.causal = causal;
  return dense_attn_params(core::DenseProblem(args), rows_per_unit, shift_step);
}

template <int kKeys>
void check_blocks(int seq_len, bool causal, int rows_per_unit, int shift_step) {
  SCOPED_TRACE(testing::Message() << "S " << seq_len << (causal ? " causal" : " full") << ", " << rows_per_unit
                                  << "-row units, " << kKeys << "-key tiles, shift step " << shift_step);
  const DenseAttnParams a = params_of(seq_len, causal, rows_per_unit, shift_step);
  ASSERT_GE(a.row_shift, 0);
  ASSERT_LT(a.row_shift, rows_per_unit);
  if (!causal || shift_step == 0) ASSERT_EQ(a.row_shift, 0);
  if (shift_step > 0) ASSERT_EQ(a.row_shift % shift_step, 0);

  std::vector<int> owners(static_cast<size_t>(seq_len), 0);
  for (int m = 0; m < a.num_m_blocks; ++m) {
    const tile::DenseUnit u =
        causal ? tile::dense_unit_of<true>(a, 0, m, rows_per_unit) : tile::dense_unit_of<false>(a, 0, m, rows_per_unit);
    const auto unit_tiles = tile::KeyTiles<kKeys>::of(a, u.row0, rows_per_unit);  // what the producer loads
    int most = 0;
    for (int row0 = u.row0; row0 < u.row0 + rows_per_unit; row0 += kWarpgroupRows) {
      SCOPED_TRACE(testing::Message() << "block " << m << ", rows from " << row0);
      const auto mine = tile::KeyTiles<kKeys>::of(a, row0, kWarpgroupRows);
      most = std::max(most, mine.count);
      if (row0 < 0) {
        EXPECT_LE(row0 + kWarpgroupRows, 0) << "a warpgroup straddles row 0";
        EXPECT_EQ(mine.count, 0) << "rows before row 0 must see no key tile (nothing to store)";
        continue;
      }
      if (row0 >= seq_len) {
        EXPECT_EQ(mine.count, 0);
        continue;
      }
      const int row_end = std::min(row0 + kWarpgroupRows, seq_len);
      for (int r = row0; r < row_end; ++r)
        ++owners[static_cast<size_t>(r)];
      const int key_end = causal ? row_end : seq_len;
      EXPECT_EQ(mine.count, (key_end + kKeys - 1) / kKeys);
      // Tiles before first_masked run without the mask: every row sees each whole.
      for (int n = 0; n < std::min(mine.first_masked, mine.count); ++n) {
        EXPECT_LE((n + 1) * kKeys, seq_len) << "tile " << n << " crosses the sequence end unmasked";
        if (causal) EXPECT_LE((n + 1) * kKeys - 1, row0) << "tile " << n << " crosses the diagonal unmasked";
      }
    }
    EXPECT_EQ(unit_tiles.count, most) << "block " << m << ": the producer loads what its warpgroups see, no more";
  }
  for (int r = 0; r < seq_len; ++r)
    ASSERT_EQ(owners[static_cast<size_t>(r)], 1) << "row " << r;
  if (causal && shift_step == kWarpgroupRows) {
    // The partial block went first: the last block ends within one
    // warpgroup's rows of S, so only block 0 can hold idle warpgroups.
    const int last_end = a.num_m_blocks * rows_per_unit - a.row_shift;
    EXPECT_LT(last_end - seq_len, kWarpgroupRows);
  }
}

std::vector<int> lengths() {
  std::vector<int> s;
  for (int len = 1; len <= 700; ++len)
    s.push_back(len);
  for (int len : {4095, 4096, 4097, 8191, 8192, 8193, 16383, 16384, 16385})  // the benchmark's and their neighbours
    s.push_back(len);
  return s;
}

TEST(DenseSchedule, EveryRowOnceAndEachWarpgroupItsKeyTiles) {
  for (int seq_len : lengths())
    for (bool causal : {false, true}) {
      // The sm90 kernel's shapes (three 64-row warpgroups and 128-key tiles
      // at D = 64; two with 176 or 80 keys at D = 128 and 256), shifted by
      // whole warpgroups, and the sm80 kernel's unshifted blocks.
      for (int step : {64, 0}) {
        check_blocks<128>(seq_len, causal, 192, step);
        check_blocks<176>(seq_len, causal, 128, step);
        check_blocks<80>(seq_len, causal, 128, step);
      }
      if (testing::Test::HasFatalFailure()) return;
    }
}

TEST(DenseSchedule, TheBenchmarkShapesShiftAsMeasured) {
  // hdim64_seq4k: 4096 = 21 x 192 + 64, so block 0 starts 128 rows early; the
  // other two configs divide their units.
  EXPECT_EQ(params_of(4096, true, 192, 64).row_shift, 128);
  EXPECT_EQ(params_of(4096, true, 192, 64).num_m_blocks, 22);
  EXPECT_EQ(params_of(4096, false, 192, 64).row_shift, 0);
  EXPECT_EQ(params_of(8192, true, 128, 64).row_shift, 0);
  EXPECT_EQ(params_of(16384, true, 128, 64).row_shift, 0);
}

}  // namespace
}  // namespace blockattn
