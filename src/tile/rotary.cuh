// Rotary embeddings fused into the tile operations (blockattn::Rotary), as a
// hook set (tile/hooks.cuh):
//   prologue  rotates the rows of the Q, K (and V) tiles in shared memory,
//             in fp32 with one rounding, once they have landed. Q, K and V of a
//             tile are the same tokens, so each table value is loaded once and
//             applied to all three.
//   epilogue  applies the transpose rotation to the fp32 dQ, dK (and dV)
//             accumulators before their single rounding. A thread holds both
//             halves of a pair: (2j, 2j + 1) are adjacent columns of one
//             fragment; (j, j + r/2) are fragments r/16 apart (r/2 a multiple
//             of 8, checked on the host), which needs whole rows (kWholeRows).
// Angles: row `pos` of the cos and sin tables, pos = the token's row, or its
// index within its sequence plus seq_start[seq]; a position outside the table
// is the identity and reads nothing.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/attention_params.h"
#include "tile/fragments.cuh"
#include "tile/output_kind.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::tile {

// When a prologue's threads read what they apply to a unit (RotaryHooks:
// its table values):
//   kInTurn  as they come to it: threads that run the tile's products
//            too, whose registers those need;
//   kAhead   the next unit's under this one's rotation: threads that do
//            nothing else (sm90's preparers, tensor_ring.cuh). Measured
//            (docs/perf.md, "Session 59"): 2-6% off the 128-token
//            backward at D = 64 with preparers; in the consumers'
//            prologues 3-8% slower forwards at D = 128 and spills.
enum class PrologueReads { kInTurn, kAhead };

// Eight 16-bit values of one 16-byte shared-memory unit, as fp32 and back.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& u, float (&x)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
    unpack2<T>(w[i], x[2 * i], x[2 * i + 1]);
}
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  return make_uint4(pack2<T>(x[0], x[1]), pack2<T>(x[2], x[3]), pack2<T>(x[4], x[5]), pack2<T>(x[6], x[7]));
}

// One element type's view of the cos and sin tables; kVectors: bases and row
// strides are 16-byte aligned (checked on the host), so rows may be read
// with vector loads.
template <typename Table, bool kVectors>
struct TableView {
  const Table* cos;
  const Table* sin;
  int64_t cos_row_stride, sin_row_stride;

  __device__ __forceinline__ float cos_at(int64_t pos, int pair) const {
    return to_float(cos[pos * cos_row_stride + pair]);
  }
  __device__ __forceinline__ float sin_at(int64_t pos, int pair) const {
    return to_float(sin[pos * sin_row_stride + pair]);
  }
  __device__ __forceinline__ static float to_float(float x) { return x; }
  __device__ __forceinline__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ __forceinline__ static float to_float(__half x) { return __half2float(x); }

  // Pairs [pair, pair + kN) of row `pos` (`pair` a multiple of kN), with
  // vector loads of up to 16 bytes when kVectors, else element by element: a
  // warp's scalar loads touch several times the sectors they use.
  template <int kN>
  __device__ __forceinline__ void load_pairs(int64_t pos, int pair, float (&c)[kN], float (&s)[kN]) const {
    load_pairs_at(cos + pos * cos_row_stride + pair, sin + pos * sin_row_stride + pair, c, s);
  }

  // What a walk down a column of 16-byte units reads (RotaryHooks'
  // rotate_half_split_columns; vector-aligned tables only): eight pairs'
  // cos and sin values of rows pos, pos + step, pos + 2 step, ..., as
  // loaded (16-byte words, two a table for fp32), unpacked only where used,
  // so that the next row's loads are in flight under this one's rotation
  // in few registers.
  static constexpr bool kVectorRows = kVectors;
  static constexpr int kUnitWords = 8 * static_cast<int>(sizeof(Table)) / 16;
  struct UnitWords {
    uint4 cos[kUnitWords], sin[kUnitWords];
  };
  struct Rows {
    const Table* cos;
    const Table* sin;
    int64_t cos_step, sin_step;

    __device__ __forceinline__ UnitWords load(int i) const {  // row pos + i step
      UnitWords w;
      const uint4* c = reinterpret_cast<const uint4*>(cos + i * cos_step);
      const uint4* s = reinterpret_cast<const uint4*>(sin + i * sin_step);
#pragma unroll
      for (int v = 0; v < kUnitWords; ++v)
        w.cos[v] = c[v], w.sin[v] = s[v];
      return w;
    }
  };
  __device__ __forceinline__ Rows rows_from(int64_t pos, int pair, int step) const {
    static_assert(kVectors, "16-byte loads need vector-aligned rows");
    return {cos + pos * cos_row_stride + pair, sin + pos * sin_row_stride + pair, step * cos_row_stride,
            step * sin_row_stride};
  }
  __device__ __forceinline__ static void unpack(const UnitWords& w, float (&c)[8], float (&s)[8]) {
    const Table* cw = reinterpret_cast<const Table*>(w.cos);
    const Table* sw = reinterpret_cast<const Table*>(w.sin);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      c[e] = to_float(cw[e]), s[e] = to_float(sw[e]);
  }

 private:
  // kN consecutive values at c and at s.
  template <int kN>
  __device__ __forceinline__ static void load_pairs_at(const Table* c_at, const Table* s_at, float (&c)[kN],
                                                       float (&s)[kN]) {
    constexpr int kBytes = kN * static_cast<int>(sizeof(Table));
    constexpr int kVectorBytes = kBytes < 16 ? kBytes : 16;
    constexpr int kPerVector = kVectorBytes / static_cast<int>(sizeof(Table));
    if constexpr (kVectors && (kVectorBytes == 4 || kVectorBytes == 8 || kVectorBytes == 16) &&
                  kBytes % kVectorBytes == 0) {
#pragma unroll
      for (int v = 0; v < kN / kPerVector; ++v) {
        unpack_vector<kVectorBytes>(c_at + v * kPerVector, c, v * kPerVector);
        unpack_vector<kVectorBytes>(s_at + v * kPerVector, s, v * kPerVector);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kN; ++e) {
        c[e] = to_float(c_at[e]);
        s[e] = to_float(s_at[e]);
      }
    }
  }

  template <int kBytes>
  using Vector = std::conditional_t<kBytes == 16, uint4, std::conditional_t<kBytes == 8, uint2, uint32_t>>;

  // Loads kBytes at p (one instruction) into x[at, at + kBytes / sizeof(Table)).
  template <int kBytes, int kN>
  __device__ __forceinline__ static void unpack_vector(const Table* p, float (&x)[kN], int at) {
    const Vector<kBytes> u = *reinterpret_cast<const Vector<kBytes>*>(p);
    const Table* t = reinterpret_cast<const Table*>(&u);
#pragma unroll
    for (int i = 0; i < kBytes / static_cast<int>(sizeof(Table)); ++i)
      x[at + i] = to_float(t[i]);
  }
};

// One tile's table rows staged in shared memory by an sm_90 producer (TMA:
// forward_kernel.cuh at D = 128, and the per-tile backward_kernel.cuh's
// StagedTables kernel at D = 64 and 128): rows first .. first + kRows - 1 of the
// cos table, then of the sin table, each row `half` 16-bit values. Rows past
// the table arrive as zeros; the prologue never reads them (in_table).
struct StagedAngles {
  const void* cos;
  const void* sin;
  int64_t first;  // the table row of the tile's first row
};

// TableView's interface over StagedAngles: position pos reads staged row
// pos - first, with vector loads (rows of a multiple of 8 values, 16-byte
// aligned).
template <typename Table>
struct StagedTableView {
  TableView<Table, true> rows;  // row 0: the tile's first
  int64_t first;

  __device__ __forceinline__ float cos_at(int64_t pos, int pair) const { return rows.cos_at(pos - first, pair); }
  __device__ __forceinline__ float sin_at(int64_t pos, int pair) const { return rows.sin_at(pos - first, pair); }
  template <int kN>
  __device__ __forceinline__ void load_pairs(int64_t pos, int pair, float (&c)[kN], float (&s)[kN]) const {
    rows.template load_pairs<kN>(pos - first, pair, c, s);
  }
  using View = TableView<Table, true>;
  static constexpr bool kVectorRows = true;
  using UnitWords = typename View::UnitWords;
  static constexpr int kUnitWords = View::kUnitWords;
  __device__ __forceinline__ typename View::Rows rows_from(int64_t pos, int pair, int step) const {
    return rows.rows_from(pos - first, pair, step);
  }
  __device__ __forceinline__ static void unpack(const UnitWords& w, float (&c)[8], float (&s)[8]) {
    View::unpack(w, c, s);
  }
};

// The angles of a warp's two accumulator rows (lane / 4 and lane / 4 + 8 of
// its 16), as the epilogue applies them to a kN-column output: kN / 8 pairs
// a row, in the order the accumulator holds them. Read once per tile and
// kept in registers for the three gradients (RotaryHooks::row_angles).
template <int kN>
struct RowAngles {
  float c[2][kN / 8], s[2][kN / 8];
  bool rotate[2];  // the row lies inside the block and its position inside the table
  bool loaded;     // r = kN; otherwise the epilogue reads the table itself
};
// In place of RowAngles where a kernel reads no angles ahead (or where its
// hooks need none): `loaded`, as the others have, so that a kernel may ask
// it before choosing where its angles come from.
struct NoRowAngles {
  static constexpr bool loaded = true;
};

// RowAngles of a 16-bit table, the table's own values (nothing is rounded)
// in half of RowAngles' registers (32 a thread at D = 128), read from its
// rows staged in shared memory (StagedAngles) while the slot is still held,
// or from the table itself. Word i of row h holds two 16-bit values, as read:
//   half-split pairs:   words 2j and 2j + 1 are the cos and the sin of
//                       fragment j's two adjacent pairs (the low half the
//                       first);
//   interleaved pairs:  word i is pair i's cos (low half) and sin.
// Unpacked only where the epilogue applies them, so that loading them from
// global memory ahead stalls nothing until then.
template <int kN>
struct PackedRowAngles {
  uint32_t words[2][kN / 8];
  bool rotate[2];
  bool loaded;  // r = kN; otherwise the epilogue reads the table itself
};

class RotaryHooks {
 public:
  static constexpr bool kModifiesOperands = true;
  static constexpr bool kWholeRows = true;

  __device__ explicit RotaryHooks(const AttentionParams& p) : p_(p) {}

  template <typename Layout, int kRows, int D, int kThreads, PrologueReads kReads = PrologueReads::kInTurn, typename T>
  __device__ __forceinline__ void prologue(const TileCoords& t, int tid, T* q, T* k, T* v) const {
    with_table([&](const auto& table) { rotate_tiles<Layout, kRows, D, kThreads, kReads>(table, t, tid, q, k, v); });
  }

  // The same with the tile's table rows staged in shared memory (16-bit
  // tables only: the host stages no others).
  template <typename Layout, int kRows, int D, int kThreads, typename T>
  __device__ __forceinline__ void prologue(const TileCoords& t, int tid, T* q, T* k, T* v,
                                           const StagedAngles& a) const {
    const int64_t half = p_.rotary.half;
    auto rotate = [&](auto element) {
      using Table = decltype(element);
      const StagedTableView<Table> table{
          {static_cast<const Table*>(a.cos), static_cast<const Table*>(a.sin), half, half}, a.first};
      rotate_tiles<Layout, kRows, D, kThreads, PrologueReads::kInTurn>(table, t, tid, q, k, v);
    };
    if (p_.rotary.table_type == TableType::kFP16)
      rotate(__half{});
    else
      rotate(__nv_bfloat16{});
  }

  // The table row of the block's first token, looked up with the tile's
  // schedule entry: the block's BlockSeq, then its sequence's start, are two
  // dependent global loads that would otherwise open every prologue (6-7%
  // of the rotary forward's stall samples, ncu). The sm90 per-consumer
  // backward reads them with the tile's coordinates, before its wait for
  // the tile's data, so they land during it: 1-4% of its rotary time
  // (docs/perf.md, "The table row looked up ahead").
  __device__ __forceinline__ TileCoords look_ahead(TileCoords t) const {
    t.first_position = lookup_first_position(t);
    return t;
  }

  // Transpose rotation of a gradient's whole rows (col0 == 0, kN == D); the
  // forward output (kOut) stays in the frame of the rotated v.
  template <int kN>
  __device__ __forceinline__ void epilogue(Output o, Accumulator<kN>& acc, const TileCoords& t, int rows_begin,
                                           int /*col0*/, int lane) const {
    const RotaryParams& r = p_.rotary;
    if (!rotates_back(o)) return;
    const int64_t first = first_position(t);
    with_table([&](const auto& table) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the thread's rows lane/4 and lane/4 + 8
        const AccumulatorRow row = accumulator_row(t, first, rows_begin, lane, h);
        if (!row.rotates) continue;
        const int64_t pos = row.pos;
        if (r.half_split && r.half / 8 == kN / 16) {
          rotate_back_half_split<kN / 16>(table, acc, h, pos, lane);  // r = D: the common case
        } else if (r.half_split) {
          rotate_back_half_split_any(table, acc, h, pos, lane, r.half / 8);
        } else {
#pragma unroll
          for (int j = 0; j < kN / 8; ++j) {
            const int pair = fragment_col(j, 0, lane) / 2;
            if (pair < r.half)
              rotate_back(acc.c[j][2 * h], acc.c[j][2 * h + 1], table.cos_at(pos, pair), table.sin_at(pos, pair));
          }
        }
      }
    });
  }

  // The angles of the epilogues of a tile's dQ, dK and dV, loaded once
  // where r = kN (either pair layout). The backward issues these loads
  // before its first product of the tile, so that their latency runs under
  // it: read at each epilogue, right after the product it rotates, they were
  // the rotary backward's largest stall (ncu, H200, headline-d64: the three
  // epilogue stretches held 45% of its samples, mostly waiting on the same
  // table values, read again for each gradient).
  template <int kN>
  __device__ __forceinline__ RowAngles<kN> row_angles(const TileCoords& t, int rows_begin, int lane) const {
    const RotaryParams& r = p_.rotary;
    RowAngles<kN> a;
    a.loaded = r.half == kN / 2;
    const int64_t first = first_position(t);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const AccumulatorRow row = accumulator_row(t, first, rows_begin, lane, h);
      const int64_t pos = row.pos;
      a.rotate[h] = row.rotates;
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
        a.c[h][j] = 1.f, a.s[h][j] = 0.f;
      if (!a.loaded || !a.rotate[h]) continue;
      with_table([&](const auto& table) {
        if (r.half_split) {
#pragma unroll
          for (int j = 0; j < kN / 16; ++j) {  // fragment j's two adjacent pairs: one 8-byte load per table
            float c[2], s[2];
            table.load_pairs(pos, fragment_col(j, 0, lane), c, s);
            a.c[h][2 * j] = c[0], a.c[h][2 * j + 1] = c[1];
            a.s[h][2 * j] = s[0], a.s[h][2 * j + 1] = s[1];
          }
        } else {
#pragma unroll
          for (int j = 0; j < kN / 8; ++j) {
            const int pair = fragment_col(j, 0, lane) / 2;
            a.c[h][j] = table.cos_at(pos, pair);
            a.s[h][j] = table.sin_at(pos, pair);
          }
        }
      });
    }
    return a;
  }

  template <int kN>
  __device__ __forceinline__ void epilogue(Output o, Accumulator<kN>& acc, const TileCoords& t, int rows_begin,
                                           int col0, int lane, NoRowAngles) const {
    epilogue(o, acc, t, rows_begin, col0, lane);
  }

  // The epilogue with the tile's angles loaded ahead (whole rows, col0 == 0).
  template <int kN>
  __device__ __forceinline__ void epilogue(Output o, Accumulator<kN>& acc, const TileCoords& t, int rows_begin,
                                           int col0, int lane, const RowAngles<kN>& a) const {
    if (!a.loaded) return epilogue(o, acc, t, rows_begin, col0, lane);
    if (!rotates_back(o)) return;
    rotate_back_rows(acc, a.rotate, [&](int h, int i, float& c, float& s, auto /*half_split*/) {
      c = a.c[h][i];
      s = a.s[h][i];
    });
  }

  // Whether row `row` of tile t is at table row first_position + row for
  // every row (position()), so that one copied range of table rows serves
  // the whole tile: all but packed tiles with in-sequence positions.
  __device__ __forceinline__ bool positions_follow_rows(const TileCoords& t) const {
    return t.block.segment_starts == 1 || !p_.rotary.in_sequence;
  }

  // The epilogues' angles of a warp's rows from the tile's staged rows of
  // a 16-bit table (a kernel reads them right after its prologue, before it
  // hands the slot back), where r = kN.
  template <int kN>
  __device__ __forceinline__ PackedRowAngles<kN> staged_row_angles(const TileCoords& t, int rows_begin, int lane,
                                                                   const StagedAngles& staged) const {
    const int64_t half = p_.rotary.half;
    // Row `row` of the staged rows (pos - staged.first == row: unpacked tiles only).
    return packed_row_angles_from<kN>(t, rows_begin, lane, half == kN / 2, [&](int row, int64_t) {
      return RowWords{static_cast<const uint16_t*>(staged.cos) + row * half,
                      static_cast<const uint16_t*>(staged.sin) + row * half};
    });
  }

  // The same read from the tables in global memory, where they are 16-bit
  // and vector-aligned (16-byte bases and row strides: every 4-byte pair
  // lies within one word); loaded = false otherwise (an fp32 table's angles
  // take RowAngles' twice as many registers), and the epilogue then reads
  // the table itself. Half the registers let a kernel load them earlier:
  // the 128-token backward at D = 128, before dQ's product is done
  // (docs/perf.md, "Session 54").
  template <int kN>
  __device__ __forceinline__ PackedRowAngles<kN> packed_row_angles(const TileCoords& t, int rows_begin,
                                                                   int lane) const {
    const RotaryParams& r = p_.rotary;
    const bool packs = r.half == kN / 2 && r.vector_loads && r.table_type != TableType::kFloat32;
    return packed_row_angles_from<kN>(t, rows_begin, lane, packs, [&](int, int64_t pos) {
      return RowWords{static_cast<const uint16_t*>(r.cos) + pos * r.cos_row_stride,
                      static_cast<const uint16_t*>(r.sin) + pos * r.sin_row_stride};
    });
  }

  // The epilogue with packed 16-bit angles (whole rows, col0 == 0).
  template <int kN>
  __device__ __forceinline__ void epilogue(Output o, Accumulator<kN>& acc, const TileCoords& t, int rows_begin,
                                           int col0, int lane, const PackedRowAngles<kN>& a) const {
    const RotaryParams& r = p_.rotary;
    if (!a.loaded) return epilogue(o, acc, t, rows_begin, col0, lane);
    if (!rotates_back(o)) return;
    auto apply = [&](auto element) {
      rotate_back_rows(acc, a.rotate, [&](int h, int i, float& c, float& s, auto half_split) {
        if constexpr (half_split) {  // pair i = 2j + e: half e of words 2j (cos) and 2j + 1 (sin)
          const int j = i / 2, e = i % 2;
          c = unpack_angle(a.words[h][2 * j], e, element);
          s = unpack_angle(a.words[h][2 * j + 1], e, element);
        } else {
          c = unpack_angle(a.words[h][i], 0, element);
          s = unpack_angle(a.words[h][i], 1, element);
        }
      });
    };
    if (r.table_type == TableType::kFP16)
      apply(__half{});
    else
      apply(__nv_bfloat16{});
  }

 private:
  const AttentionParams& p_;

  // Row h (0 or 1) of a warp's accumulator: tile row rows_begin + lane / 4
  // + 8 h, its table position, and whether the epilogue rotates it (inside
  // the block, its position inside the table).
  struct AccumulatorRow {
    int row;
    int64_t pos;
    bool rotates;
  };
  __device__ __forceinline__ AccumulatorRow accumulator_row(const TileCoords& t, int64_t first, int rows_begin,
                                                            int lane, int h) const {
    const int row = rows_begin + lane / 4 + 8 * h;
    const int64_t pos = position(t, first, row);
    return {row, pos, row < t.block.row_count && in_table(pos)};
  }

  // A table row's cos and sin values as 16-bit words.
  struct RowWords {
    const uint16_t* cos;
    const uint16_t* sin;
  };

  // PackedRowAngles of the warp's two rows, row `row` (position pos) read
  // through rows_of(row, pos), where `loads` (r = kN and a table the
  // source can read so).
  template <int kN, typename RowsOf>
  __device__ __forceinline__ PackedRowAngles<kN> packed_row_angles_from(const TileCoords& t, int rows_begin, int lane,
                                                                        bool loads, RowsOf&& rows_of) const {
    PackedRowAngles<kN> a{};  // rotate[] false
    a.loaded = loads;
    if (!loads) return a;  // nothing computed where the caller falls back to another form
    const int64_t first = first_position(t);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const AccumulatorRow row = accumulator_row(t, first, rows_begin, lane, h);
      a.rotate[h] = row.rotates;
      if (!row.rotates) continue;
      const RowWords w = rows_of(row.row, row.pos);
      if (p_.rotary.half_split) {
#pragma unroll
        for (int j = 0; j < kN / 16; ++j) {  // fragment j's two adjacent pairs: one 4-byte read per table
          const int pair = fragment_col(j, 0, lane);
          a.words[h][2 * j] = *reinterpret_cast<const uint32_t*>(w.cos + pair);
          a.words[h][2 * j + 1] = *reinterpret_cast<const uint32_t*>(w.sin + pair);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kN / 8; ++j) {
          const int pair = fragment_col(j, 0, lane) / 2;
          a.words[h][j] = static_cast<uint32_t>(w.cos[pair]) | static_cast<uint32_t>(w.sin[pair]) << 16;
        }
      }
    }
    return a;
  }

  // Whether output o leaves rotated back: the gradients of the rotated
  // tensors, not the forward output (it stays in the frame of the rotated v).
  __device__ __forceinline__ bool rotates_back(Output o) const {
    return o != Output::kOut && (o != Output::kDv || p_.rotary.rotate_v);
  }

  // The prologue's rotation of a tile's Q, K (and V) with the angles of
  // `table` (a TableView or StagedTableView).
  template <typename Layout, int kRows, int D, int kThreads, PrologueReads kReads, typename Table, typename T>
  __device__ __forceinline__ void rotate_tiles(const Table& table, const TileCoords& t, int tid, T* q, T* k,
                                               T* v) const {
    const RotaryParams& r = p_.rotary;
    T* const tiles[3] = {q, k, r.rotate_v ? v : nullptr};
    const int half = r.half;
    if (r.half_split) {
      if constexpr (Table::kVectorRows && walks_columns<Layout, D / 16, kThreads>()) {
        if (positions_follow_rows(t))
          return rotate_half_split_columns<Layout, kRows, D, kThreads, kReads>(table, t, tid, tiles);
      }
      // Units of r/2 <= D/2 columns, each paired with the unit r/2 on.
      for_each_unit<kRows, D / 16, kThreads>(t, tid, half / 8, [&](int row, int col, int64_t pos) {
        float c[8], s[8];
        table.load_pairs(pos, col, c, s);
        rotate_half_units_of(tiles, Layout::offset(row, col), Layout::offset(row, col + half), c, s);
      });
    } else {
      // Units of 4 pairs; the last may hold pairs past r/2 (angle 0).
      for_each_unit<kRows, D / 8, kThreads>(t, tid, (2 * half + 7) / 8, [&](int row, int col, int64_t pos) {
        float c[4], s[4];
        if (col / 2 + 4 <= half) {
          table.load_pairs(pos, col / 2, c, s);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int pair = col / 2 + e;
            c[e] = pair < half ? table.cos_at(pos, pair) : 1.f;
            s[e] = pair < half ? table.sin_at(pos, pair) : 0.f;
          }
        }
#pragma unroll
        for (T* tile : tiles)
          if (tile != nullptr) rotate_interleaved_unit<T>(*unit_at<Layout>(tile, row, col), c, s);
      });
    }
  }

  // Whether each of kThreads threads may keep one of a row's kUnits unit
  // columns and walk down it in steps of whole swizzle periods
  // (tile/smem_layout.cuh), so that its shared-memory offsets and table
  // addresses advance by constants.
  template <typename Layout, int kUnits, int kThreads>
  __device__ static constexpr bool walks_columns() {
    return kThreads % kUnits == 0 && (kThreads / kUnits) % Layout::kSwizzlePeriod == 0;
  }

  // The half-split prologue's rotation where walks_columns(), the rows'
  // positions follow them and the table's rows take 16-byte loads: thread
  // tid keeps unit column tid % kUnits and rows tid / kUnits + kStep i.
  // for_each_unit's general walk works out each unit's row, swizzled
  // offsets (one a tensor, with signed divisions) and table address anew:
  // the preparers of the 128-token backward at D = 64 issued 416 SASS
  // instructions a unit with it, 270 with this walk (docs/perf.md,
  // "Session 59").
  template <typename Layout, int kRows, int D, int kThreads, PrologueReads kReads, typename Table, typename T>
  __device__ __forceinline__ void rotate_half_split_columns(const Table& table, const TileCoords& t, int tid,
                                                            T* const (&tiles)[3]) const {
    constexpr int kUnits = D / 16, kStep = kThreads / kUnits, kJobs = (kRows + kStep - 1) / kStep;
    const int half = p_.rotary.half;
    const unsigned me = static_cast<unsigned>(tid);
    const int col = static_cast<int>(me % kUnits) * 8, row0 = static_cast<int>(me / kUnits);
    if (col >= half) return;  // r < D: the unit holds no pair
    const int64_t pos0 = first_position(t) + row0;
    const int lo0 = Layout::offset(row0, col), hi0 = Layout::offset(row0, col + half);
    const auto rows = table.rows_from(pos0, col, kStep);
    auto rotates = [&](int i) { return row0 + i * kStep < t.block.row_count && in_table(pos0 + i * kStep); };
    // kAhead: 16-bit tables only (four registers a table; an fp32 table's
    // eight spilled the preparers at 96 registers). The walk is not
    // unrolled: unrolled, ptxas hoisted every unit's loads to the top and
    // the preparers spilled (348 bytes at 80 registers); unrolled by two in
    // turn, it measured level on the H200 and spilled more in the sm80
    // backward at D = 64 (docs/perf.md, "Session 59").
    constexpr bool kLoadsAhead = kReads == PrologueReads::kAhead && Table::kUnitWords == 1;
    typename Table::UnitWords ahead;
    if (kLoadsAhead && rotates(0)) ahead = rows.load(0);
#pragma unroll 1
    for (int i = 0; i < kJobs; ++i) {
      typename Table::UnitWords words = ahead;
      if (kLoadsAhead && i + 1 < kJobs && rotates(i + 1)) ahead = rows.load(i + 1);
      if (!rotates(i)) continue;
      if (!kLoadsAhead) words = rows.load(i);
      float c[8], s[8];
      Table::unpack(words, c, s);
      const int step = i * kStep * Layout::kRowStride;
      rotate_half_units_of(tiles, lo0 + step, hi0 + step, c, s);
    }
  }

  // The half-split pairs of the units at element offsets lo and hi (r/2
  // columns on) of each tensor in `tiles` (null: left alone), in place.
  template <typename T>
  __device__ __forceinline__ static void rotate_half_units_of(T* const (&tiles)[3], int lo, int hi, const float (&c)[8],
                                                              const float (&s)[8]) {
#pragma unroll
    for (T* tile : tiles)
      if (tile != nullptr)
        rotate_half_units<T>(*reinterpret_cast<uint4*>(tile + lo), *reinterpret_cast<uint4*>(tile + hi), c, s);
  }

  // Runs f(row, col, pos) for the tile's 16-byte units (row < the block's
  // rows, unit < `units` of at most kUnits per row, position inside the
  // table): every thread takes units tid, tid + kThreads, ... of a fixed
  // count. Two per iteration keep two units' table loads in flight without
  // running the consumers into spills (measured: a full unroll spilled 276
  // bytes in the sm90 forward at D = 128).
  template <int kRows, int kUnits, int kThreads, typename F>
  __device__ __forceinline__ void for_each_unit(const TileCoords& t, int tid, int units, F&& f) const {
    const int64_t first = first_position(t);
    constexpr int kJobs = (kRows * kUnits + kThreads - 1) / kThreads;
#pragma unroll 2
    for (int i = 0; i < kJobs; ++i) {
      const int job = tid + i * kThreads, row = job / kUnits, unit = job % kUnits;
      const int64_t pos = position(t, first, row);
      if (row < t.block.row_count && unit < units && in_table(pos)) f(row, unit * 8, pos);
    }
  }

  // Runs f(TableView<element type, vector loads allowed>): both are resolved
  // once per call, so the loops inside are straight-line loads that the
  // compiler can batch (a branch per load would serialize their latencies).
  template <typename F>
  __device__ __forceinline__ void with_table(F&& f) const {
    const RotaryParams& r = p_.rotary;
    auto with_type = [&](auto element) {
      using Table = decltype(element);
      const Table* cos = static_cast<const Table*>(r.cos);
      const Table* sin = static_cast<const Table*>(r.sin);
      if (r.vector_loads)
        f(TableView<Table, true>{cos, sin, r.cos_row_stride, r.sin_row_stride});
      else
        f(TableView<Table, false>{cos, sin, r.cos_row_stride, r.sin_row_stride});
    };
    switch (r.table_type) {
      case TableType::kBF16:
        with_type(__nv_bfloat16{});
        break;
      case TableType::kFP16:
        with_type(__half{});
        break;
      default:
        with_type(float{});
    }
  }

  // Table row of the tile's first token (later rows follow it one by one):
  // looked up ahead (look_ahead) or now.
  __device__ __forceinline__ int64_t first_position(const TileCoords& t) const {
    return t.first_position != kUnknownPosition ? t.first_position : lookup_first_position(t);
  }
  __device__ __forceinline__ int64_t lookup_first_position(const TileCoords& t) const {
    const RotaryParams& r = p_.rotary;
    if (!r.in_sequence) return t.block.row_begin;
    const schedule::BlockSeq at = p_.schedule.block_seqs[t.block_index];
    return static_cast<int64_t>(at.first_pos) + (r.seq_start != nullptr ? r.seq_start[at.seq] : 0);
  }
  __device__ __forceinline__ bool in_table(int64_t pos) const { return pos >= 0 && pos < p_.rotary.num_positions; }

  // Table row of row `row` of the tile: first_position + row, except in a
  // packed tile with in-sequence positions, where each row counts from its
  // own sequence's first token (segment k is sequence BlockSeq::seq + k).
  __device__ __forceinline__ int64_t position(const TileCoords& t, int64_t first, int row) const {
    const uint64_t starts = t.block.segment_starts;
    if (starts == 1 || !p_.rotary.in_sequence) return first + row;
    const int32_t seq = p_.schedule.block_seqs[t.block_index].seq + schedule::segment_index(starts, row);
    return (row - schedule::segment_first_row(starts, row)) +
           (p_.rotary.seq_start != nullptr ? p_.rotary.seq_start[seq] : 0);
  }

  // Half-split pairs of row h of the thread's fragments: fragment j pairs
  // with fragment j + shift (r/2 columns on), for j < shift = r/16. The
  // shift is a compile-time constant, so the fragments stay in registers.
  template <int kShift, typename Table, int kN>
  __device__ __forceinline__ static void rotate_back_half_split(const Table& table, Accumulator<kN>& acc, int h,
                                                                int64_t pos, int lane) {
#pragma unroll
    for (int j = 0; j < kShift; ++j) {
      float c[2], s[2];  // the fragment's two adjacent pairs: one 8-byte load per table
      table.load_pairs(pos, fragment_col(j, 0, lane), c, s);
#pragma unroll
      for (int e = 0; e < 2; ++e)
        rotate_back(acc.c[j][2 * h + e], acc.c[j + kShift][2 * h + e], c[e], s[e]);
    }
  }

  // The same for a rotary dim below D (any shift), through a copy of the
  // row that may be indexed at run time (local memory). One compact loop
  // instead of a variant per shift: with those, every table variant times
  // every shift made a rotary backward compile unit take 52 s
  // (docs/perf.md, "Build time").
  template <typename Table, int kN>
  __device__ __forceinline__ static void rotate_back_half_split_any(const Table& table, Accumulator<kN>& acc, int h,
                                                                    int64_t pos, int lane, int shift) {
    float x[kN / 8][2];
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
      x[j][0] = acc.c[j][2 * h], x[j][1] = acc.c[j][2 * h + 1];
#pragma unroll 1
    for (int j = 0; j < shift; ++j) {
      float c[2], s[2];
      table.load_pairs(pos, fragment_col(j, 0, lane), c, s);
      rotate_back(x[j][0], x[j + shift][0], c[0], s[0]);
      rotate_back(x[j][1], x[j + shift][1], c[1], s[1]);
    }
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
      acc.c[j][2 * h] = x[j][0], acc.c[j][2 * h + 1] = x[j][1];
  }

  // R^T on the warp's two rows h of a whole-row accumulator (those with
  // rotate[h]), pair i of row h at the angles angles(h, i, cos, sin,
  // half_split) gives: i counts the row's pairs in RowAngles' order (kN / 8
  // of them), which both forms of loaded angles share, and half_split
  // (std::true_type or std::false_type) is the pair layout this function
  // has already branched on, for a source whose words depend on it.
  template <int kN, typename Angles>
  __device__ __forceinline__ void rotate_back_rows(Accumulator<kN>& acc, const bool (&rotate)[2],
                                                   const Angles& angles) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!rotate[h]) continue;
      if (p_.rotary.half_split) {
#pragma unroll
        for (int i = 0; i < kN / 8; ++i) {  // fragment j's adjacent pairs e = 0, 1 are i = 2j + e
          float c, s;
          angles(h, i, c, s, std::true_type{});
          rotate_back(acc.c[i / 2][2 * h + i % 2], acc.c[i / 2 + kN / 16][2 * h + i % 2], c, s);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kN / 8; ++i) {  // pair i is fragment i's two columns
          float c, s;
          angles(h, i, c, s, std::false_type{});
          rotate_back(acc.c[i][2 * h], acc.c[i][2 * h + 1], c, s);
        }
      }
    }
  }

  // The 16-bit table value in half `e` of `word` (0: the low half) as fp32.
  __device__ __forceinline__ static float unpack_angle(uint32_t word, int e, __nv_bfloat16) {
    return __uint_as_float(e == 0 ? word << 16 : word & 0xffff0000u);
  }
  __device__ __forceinline__ static float unpack_angle(uint32_t word, int e, __half) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(e == 0 ? word : word >> 16)));
  }

  // x <- R^T x for one pair.
  __device__ __forceinline__ static void rotate_back(float& a, float& b, float c, float s) {
    const float xa = a, xb = b;
    a = xa * c + xb * s;
    b = xb * c - xa * s;
  }

  // The 16-byte unit of a tile in shared memory holding (row, col .. col + 7).
  template <typename Layout, typename T>
  __device__ __forceinline__ static uint4* unit_at(T* tile, int row, int col) {
    return reinterpret_cast<uint4*>(tile + Layout::offset(row, col));
  }

  // Pairs (lo[i], hi[i]), i < 8, of a unit and the one r/2 columns on, in
  // place. The copies (uint4(lo_unit)) make each read one 16-byte access,
  // and the assignments each write: with unpack8 and pack8 working on the
  // unit where it lies in shared memory, the compiler read it as 8-byte
  // halves and wrote it as 4-byte words, a third of the prologue's
  // shared-memory wavefronts (docs/perf.md, "Session 55", item 2).
  template <typename T>
  __device__ __forceinline__ static void rotate_half_units(uint4& lo_unit, uint4& hi_unit, const float (&c)[8],
                                                           const float (&s)[8]) {
    float a[8], b[8];
    unpack8<T>(uint4(lo_unit), a);
    unpack8<T>(uint4(hi_unit), b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float xa = a[i], xb = b[i];
      a[i] = xa * c[i] - xb * s[i];
      b[i] = xb * c[i] + xa * s[i];
    }
    lo_unit = pack8<T>(a);
    hi_unit = pack8<T>(b);
  }

  // Pairs (2i, 2i + 1), i < 4, of one unit, in place (read and written whole).
  template <typename T>
  __device__ __forceinline__ static void rotate_interleaved_unit(uint4& unit, const float (&c)[4],
                                                                 const float (&s)[4]) {
    float x[8];
    unpack8<T>(uint4(unit), x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float xa = x[2 * i], xb = x[2 * i + 1];
      x[2 * i] = xa * c[i] - xb * s[i];
      x[2 * i + 1] = xb * c[i] + xa * s[i];
    }
    unit = pack8<T>(x);
  }
};

}  // namespace blockattn::tile
