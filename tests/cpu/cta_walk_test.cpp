// The persistent kernels' walks over their tile tables (schedule/cta_walk.h):
// over all CTAs, every tile of the table exactly once, each CTA's walk
// increasing (the frames stop at its first tile past the table), and a
// consumer's tiles, every kConsumers-th of its CTA's, one fixed stride apart
// (sm90/frame.cuh's consume_tiles steps by it).
#include <gtest/gtest.h>

#include <vector>

#include "schedule/cta_walk.h"

namespace blockattn::schedule {
namespace {

// The tiles CTA `cta` takes, in its order, as the frame's producer walks them.
std::vector<int> walk(int together, int cta, int ctas, int num_tiles) {
  std::vector<int> tiles;
  int i = 0;
  for (int tile = cta_tile(together, cta, ctas, 0); tile < num_tiles; tile += cta_tile_step(together, ctas, i), ++i) {
    EXPECT_EQ(tile, cta_tile(together, cta, ctas, i)) << "the step and the formula disagree at i = " << i;
    tiles.push_back(tile);
    if (i > num_tiles) {  // a walk that does not advance
      ADD_FAILURE() << "CTA " << cta << "'s walk is longer than the table";
      break;
    }
  }
  return tiles;
}

TEST(CtaWalk, EveryTileOnceInIncreasingOrder) {
  for (int together : {1, 2, 3})
    for (int ctas : {1, 2, 3, 7, 132})
      for (int num_tiles : {0, 1, 2, 3, 5, 131, 132, 133, 263, 264, 265, 1000, 4099}) {
        SCOPED_TRACE(testing::Message() << "together " << together << ", " << ctas << " CTAs, " << num_tiles
                                        << " tiles");
        std::vector<int> seen(num_tiles, 0);
        for (int cta = 0; cta < ctas; ++cta) {
          const std::vector<int> tiles = walk(together, cta, ctas, num_tiles);
          for (size_t k = 0; k < tiles.size(); ++k) {
            ASSERT_GE(tiles[k], 0);
            ASSERT_LT(tiles[k], num_tiles);
            ++seen[tiles[k]];
            if (k > 0) EXPECT_LT(tiles[k - 1], tiles[k]) << "CTA " << cta << "'s walk goes back";
          }
        }
        for (int t = 0; t < num_tiles; ++t)
          EXPECT_EQ(seen[t], 1) << "tile " << t;
      }
}

TEST(CtaWalk, OneOrderTakesNeighboursToNeighbouringCtasTheOtherToOneCta) {
  // 132 CTAs: tiles 0 and 1 (two heads of block 0) go to CTAs 0 and 1 one at
  // a time, to CTA 0 as its tiles 0 and 1 two at a time.
  EXPECT_EQ(cta_tile(1, 0, 132, 0), 0);
  EXPECT_EQ(cta_tile(1, 1, 132, 0), 1);
  EXPECT_EQ(cta_tile(1, 0, 132, 1), 132);
  EXPECT_EQ(cta_tile(2, 0, 132, 0), 0);
  EXPECT_EQ(cta_tile(2, 0, 132, 1), 1);
  EXPECT_EQ(cta_tile(2, 0, 132, 2), 264);
  EXPECT_EQ(cta_tile(2, 1, 132, 0), 2);
}

TEST(CtaWalk, AConsumersTilesOneStrideApart) {
  // consume_tiles: consumer c takes its CTA's tiles i = c, c + C, ..., from
  // cta_tile(c) in steps of C * ctas, where `together` is 1 or C.
  for (int consumers : {2, 3})
    for (int together : {1, consumers})
      for (int ctas : {1, 5, 132})
        for (int cta : {0, ctas / 2, ctas - 1})
          for (int c = 0; c < consumers; ++c)
            for (int i = c; i < 40; i += consumers)
              EXPECT_EQ(cta_tile(together, cta, ctas, i),
                        cta_tile(together, cta, ctas, c) + (i - c) / consumers * consumers * ctas)
                  << "together " << together << ", consumer " << c << ", i = " << i;
}

}  // namespace
}  // namespace blockattn::schedule
