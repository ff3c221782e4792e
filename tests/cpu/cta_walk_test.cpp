// The persistent kernels' walks over their tile tables (schedule/cta_walk.h):
// over all CTAs, every tile of the table exactly once, each CTA's walk
// increasing (the frames stop at its first tile past the table), and a
// consumer's tiles, every kConsumers-th of its CTA's, one fixed stride apart
// (sm90/tensor_ring.cuh's consumers walk it). The claiming walk
// (ChunkClaimingWalk, the sm90 frame's producer): every tile once however the
// CTAs' claims interleave, and no tile outside the table from a corrupt
// counter.
#include <gtest/gtest.h>

#include <climits>
#include <random>
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

// The grid's CTAs walking with claims on one counter, in a random
// interleaving: each step, a random CTA still walking takes its next tile.
// Returns how often each tile was taken; checks each CTA's tiles increase and
// that a finished walk stays finished (the producer asks once more per
// consumer after its first tile past the table).
template <int kTogether, int kStatic>
std::vector<int> claimed_walks(int ctas, int num_tiles, std::mt19937& rng) {
  int counter = 0;
  auto claim = [&] { return counter++; };
  std::vector<ChunkClaimingWalk<kTogether, kStatic>> walks;
  for (int cta = 0; cta < ctas; ++cta)
    walks.emplace_back(cta, ctas, claim);
  std::vector<int> seen(num_tiles, 0), last(ctas, -1), walking(ctas);
  for (int cta = 0; cta < ctas; ++cta)
    walking[cta] = cta;
  while (!walking.empty()) {
    const size_t pick = std::uniform_int_distribution<size_t>(0, walking.size() - 1)(rng);
    const int cta = walking[pick];
    const int tile = walks[cta].next(num_tiles, claim);
    if (tile >= num_tiles) {
      for (int more = 0; more < 3; ++more)
        EXPECT_GE(walks[cta].next(num_tiles, claim), num_tiles) << "CTA " << cta;
      walking.erase(walking.begin() + static_cast<std::ptrdiff_t>(pick));
      continue;
    }
    EXPECT_GE(tile, 0);
    EXPECT_GT(tile, last[cta]) << "CTA " << cta << "'s walk goes back";
    last[cta] = tile;
    if (tile >= 0) ++seen[tile];
    if (counter > num_tiles + ctas + 1) {  // more claims than chunks could need
      ADD_FAILURE() << "the walks claim without end";
      break;
    }
  }
  return seen;
}

template <int kTogether, int kStatic>
void check_claimed_walks() {
  std::mt19937 rng(kTogether * 100 + kStatic);
  for (int ctas : {1, 2, 3, 7, 132})
    for (int num_tiles : {0, 1, 2, 5, 131, 132, 133, 263, 1000, 1057, 4099})
      for (int order = 0; order < 3; ++order) {
        SCOPED_TRACE(testing::Message() << "together " << kTogether << ", static " << kStatic << ", " << ctas
                                        << " CTAs, " << num_tiles << " tiles, order " << order);
        const std::vector<int> seen = claimed_walks<kTogether, kStatic>(ctas, num_tiles, rng);
        for (int t = 0; t < num_tiles; ++t)
          ASSERT_EQ(seen[t], 1) << "tile " << t;
      }
}

TEST(ChunkClaimingWalk, EveryTileOnceHoweverTheClaimsInterleave) {
  // The rings of the sm90 configs: 2 stages (wide heads) up to 18 (D = 32),
  // and 6 with neighbour pairs, 3 with neighbour triples.
  check_claimed_walks<1, 2>();
  check_claimed_walks<1, 4>();
  check_claimed_walks<1, 8>();
  check_claimed_walks<1, 18>();
  check_claimed_walks<2, 6>();
  check_claimed_walks<3, 3>();
}

TEST(ChunkClaimingWalk, FirstChunksStaticThenClaimedInOrder) {
  // 4 CTAs, a ring of 2: CTA 1 takes tiles 1 and 5 statically, then the
  // chunk of its claim, here the grid's third: tiles 8 + 2 * 2 and 13.
  int counter = 2;
  auto claim = [&] { return counter++; };
  ChunkClaimingWalk<1, 2> walk(1, 4, claim);
  EXPECT_EQ(walk.next(100, claim), 1);
  EXPECT_EQ(walk.next(100, claim), 5);
  EXPECT_EQ(walk.next(100, claim), 12);
  EXPECT_EQ(walk.next(100, claim), 13);
  EXPECT_EQ(walk.next(100, claim), 14);  // claim 3, made as the chunk at 12 started
  EXPECT_EQ(counter, 5);                 // the chunk at 16 claimed as the one at 14 started
}

TEST(ChunkClaimingWalk, ACorruptCounterNamesNoTileOutsideTheTable) {
  // A workspace whose counter something else wrote: claims anywhere,
  // negative and near INT_MAX included. Tiles may repeat or be skipped, but
  // none is negative, and the walk ends.
  for (int start : {-7, -1, 1 << 28, INT_MAX / 8 - 1, INT_MAX - 3, INT_MAX}) {
    SCOPED_TRACE(testing::Message() << "counter at " << start);
    int counter = start;
    auto claim = [&] { return counter == INT_MAX ? INT_MAX : counter++; };
    ChunkClaimingWalk<2, 6> walk(3, 132, claim);
    int calls = 0, tile = 0;
    for (; calls < 100 && (tile = walk.next(1000, claim)) < 1000; ++calls)
      ASSERT_GE(tile, 0);
    EXPECT_LT(calls, 100) << "the walk does not end";
  }
}

}  // namespace
}  // namespace blockattn::schedule
