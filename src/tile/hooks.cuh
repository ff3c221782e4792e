// The two extension points of a tile operation, and the hook set of each
// core::Fusion. Every kernel calls them at the same two places:
//   prologue: once a tile's operands are in shared memory, before any product
//             reads them, on the operand tiles the transform applies to (q, k,
//             v; a null pointer is an operand to leave alone): where rotary
//             embeddings rotate them;
//   epilogue: on a warp's fp32 output accumulator rows, before they are
//             scaled, rounded and staged: where the backward applies the
//             transpose rotation to dQ, dK (and dV).
// Beside them, look_ahead(coords) fills in what the two read per tile from
// global memory (the rotary table row of the block's first token), where a
// frame reads a tile's coordinates before it waits for the tile; and
// row_angles<kN>(coords, rows_begin, lane) reads what the epilogue needs for
// a warp's rows, for a kernel to issue early and pass to the epilogue
// (an overload taking it).
// A hook set is a type constructed from the kernel's AttentionParams with
// these members and two flags:
//   kModifiesOperands  the prologue writes shared memory (the kernel then
//                      orders those writes before the products that read them);
//   kWholeRows         the epilogue needs every column of an output row in one
//                      accumulator (the kernel then computes dQ full width
//                      instead of in 64-column slices).
// NoHooks does nothing and compiles away.
#pragma once

#include "common/attention_params.h"
#include "core/problem.h"
#include "tile/fragments.cuh"
#include "tile/rotary.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::tile {

struct NoHooks {
  static constexpr bool kModifiesOperands = false;
  static constexpr bool kWholeRows = false;

  __device__ explicit NoHooks(const AttentionParams&) {}

  // The tile's coordinates with whatever the hooks read per tile looked up,
  // for a frame that reads them before waiting for the tile's data.
  __device__ TileCoords look_ahead(const TileCoords& t) const { return t; }

  // Tiles of kRows x D elements in `Layout`, transformed by kThreads threads
  // (`tid` in [0, kThreads)), which read what they apply as kReads says.
  template <typename Layout, int kRows, int D, int kThreads, PrologueReads kReads = PrologueReads::kInTurn, typename T>
  __device__ __forceinline__ void prologue(const TileCoords&, int /*tid*/, T* /*q*/, T* /*k*/, T* /*v*/) const {}

  // `rows_begin` is the tile row of the warp's first accumulator row, `col0`
  // the output column of its first accumulator column.
  template <int kN>
  __device__ __forceinline__ void epilogue(Output, Accumulator<kN>&, const TileCoords&, int /*rows_begin*/,
                                           int /*col0*/, int /*lane*/) const {}

  // What the epilogue reads per tile, read ahead (RotaryHooks::row_angles),
  // and the epilogue that takes it.
  template <int kN>
  __device__ __forceinline__ NoRowAngles row_angles(const TileCoords&, int /*rows_begin*/, int /*lane*/) const {
    return {};
  }
  template <int kN>
  __device__ __forceinline__ void epilogue(Output, Accumulator<kN>&, const TileCoords&, int /*rows_begin*/,
                                           int /*col0*/, int /*lane*/, NoRowAngles) const {}
  // RotaryHooks::packed_row_angles' counterpart: nothing to load.
  template <int kN>
  __device__ __forceinline__ NoRowAngles packed_row_angles(const TileCoords&, int /*rows_begin*/, int /*lane*/) const {
    return {};
  }
};

template <core::Fusion F>
struct HooksFor;
template <>
struct HooksFor<core::Fusion::kNone> {
  using type = NoHooks;
};
template <>
struct HooksFor<core::Fusion::kRotary> {
  using type = RotaryHooks;
};

template <core::Fusion F>
using Hooks = typename HooksFor<F>::type;

}  // namespace blockattn::tile
