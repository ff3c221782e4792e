// The two extension points of a tile operation. Every kernel calls them at the
// same two places:
//   prologue: once a tile's operands are in shared memory, before any product
//             reads them (where rotary embeddings rotate Q and K);
//   epilogue: on each fp32 output accumulator of the warp's 16 rows, before it
//             is scaled, rounded and staged (where the backward applies the
//             transpose rotation to dQ and dK).
// A hook set is a type with these members; kModifiesOperands tells the kernel
// whether the prologue writes shared memory (then the kernel orders those
// writes before the products that read the operands). NoHooks, the set every
// kernel is built with today, does nothing and compiles away.
#pragma once

#include "tile/fragments.cuh"
#include "tile/tile_coords.cuh"

namespace blockattn::tile {

// Which output an epilogue sees.
enum class Output { kOut, kDq, kDk, kDv };

struct NoHooks {
  static constexpr bool kModifiesOperands = false;

  // `operands` names the tile's operand tiles by role (.q, .k, ...); `tid` is
  // the thread's index among the threads that run the tile operation.
  template <typename Operands>
  __device__ __forceinline__ void prologue(const Operands&, const TileCoords&, int /*tid*/) const {}

  // `rows_begin` is the tile row of the warp's first accumulator row.
  template <int kN>
  __device__ __forceinline__ void epilogue(Output, Accumulator<kN>&, const TileCoords&, int /*rows_begin*/,
                                           int /*col0*/, int /*lane*/) const {}
};

}  // namespace blockattn::tile
