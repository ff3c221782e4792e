// The sm_90 producer's walk over (block, query heads) units
// (tile/tile_coords.cuh): QueryHeadCursor, which takes a unit that follows
// the previous one by increments and divides only at a jump, must give
// exactly the coordinates of the division (QueryHeadLookup's, and the
// formula below for head pairs) for every order a producer can walk in:
// runs of consecutive units (claimed chunks) starting anywhere, across
// block boundaries, after jumps back and forth. And kv_head_after, the head
// pairs' second KV head, must be (q_head + 1) / group_size.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tile/tile_coords.cuh"

namespace blockattn::tile {
namespace {

// A schedule of `blocks` entries whose rows tell them apart.
struct FakeSchedule {
  std::vector<schedule::BlockDesc> entries;
  AttentionParams params{};
  FakeSchedule(int blocks, int num_q_heads, int group_size) {
    for (int b = 0; b < blocks; ++b)
      entries.push_back({64 * b + 7, 1 + b % 64});
    params.num_q_heads = num_q_heads;
    params.group_size = group_size;
    params.schedule.blocks = entries.data();
  }
};

// Unit u's coordinates by division: block u / units_per_block, first query
// head (u % units_per_block) * heads_per_unit, its KV head by division.
template <int kHeadsPerUnit>
void expect_division(const FakeSchedule& s, int unit, const TileCoords& got) {
  const int per_block = (s.params.num_q_heads + kHeadsPerUnit - 1) / kHeadsPerUnit;
  const int block = unit / per_block;
  const int q_head = unit % per_block * kHeadsPerUnit;
  ASSERT_EQ(got.block_index, block) << "unit " << unit;
  ASSERT_EQ(got.q_head, q_head) << "unit " << unit;
  ASSERT_EQ(got.kv_head, q_head / s.params.group_size) << "unit " << unit;
  ASSERT_EQ(got.block.row_begin, s.entries[block].row_begin) << "unit " << unit << ": another block's entry";
  ASSERT_EQ(got.block.row_count, s.entries[block].row_count) << "unit " << unit;
}

template <int kHeadsPerUnit>
void check_walks(int num_q_heads, int group_size, std::mt19937& rng) {
  const int blocks = 37;
  const FakeSchedule s(blocks, num_q_heads, group_size);
  QueryHeadCursor<kHeadsPerUnit> cursor(s.params);
  const int units = blocks * cursor.units_per_block();
  SCOPED_TRACE(::testing::Message() << "Hq " << num_q_heads << ", group " << group_size << ", " << kHeadsPerUnit
                                    << " heads a unit");
  for (int u = 0; u < units; ++u)  // one run over the whole table
    expect_division<kHeadsPerUnit>(s, u, cursor(u));
  // Runs of random lengths from random starts (claimed chunks after a static
  // ring), a fresh cursor and a reused one alike.
  std::uniform_int_distribution<int> start(0, units - 1), length(1, 3 * num_q_heads + 2);
  for (int run = 0; run < 200; ++run) {
    QueryHeadCursor<kHeadsPerUnit> fresh(s.params);
    const int first = start(rng), n = length(rng);
    for (int u = first; u < first + n && u < units; ++u) {
      expect_division<kHeadsPerUnit>(s, u, cursor(u));
      expect_division<kHeadsPerUnit>(s, u, fresh(u));
    }
  }
}

TEST(QueryHeadWalk, CursorMatchesTheDivisionInEveryOrder) {
  std::mt19937 rng(1234);
  for (int hkv : {1, 2, 3, 4})
    for (int group : {1, 2, 3, 4, 8}) {
      check_walks<1>(hkv * group, group, rng);
      check_walks<2>(hkv * group, group, rng);
    }
}

TEST(QueryHeadWalk, LookupIsTheDivision) {
  const FakeSchedule s(5, 6, 3);
  const QueryHeadLookup lookup(s.params);
  EXPECT_EQ(lookup.units_per_block(), 6);
  for (int u = 0; u < 5 * 6; ++u)
    expect_division<1>(s, u, lookup(u));
}

TEST(QueryHeadWalk, KvHeadAfterIsTheNextHeadsGroup) {
  for (int group : {1, 2, 3, 4, 8})
    for (int q_head = 0; q_head < 4 * group; ++q_head) {
      TileCoords t{};
      t.q_head = q_head;
      t.kv_head = q_head / group;
      EXPECT_EQ(kv_head_after(t, group), (q_head + 1) / group) << "group " << group << ", q_head " << q_head;
    }
}

}  // namespace
}  // namespace blockattn::tile
