// Shared-memory tile layouts of 16-bit elements, and the fragment loads from
// them that every architecture here has (ldmatrix, sm_75+).
//
// A layout is a type with a static offset(row, col) (in elements; col a
// multiple of 8 or within one 16-byte unit). Both XOR the 16-byte unit index
// with row % 8, so the eight row addresses of an ldmatrix and a warp's 16-byte
// accesses fall in distinct banks. The XOR repeats every kSwizzlePeriod rows,
// so offset(row + kSwizzlePeriod m, col) = offset(row, col) + kSwizzlePeriod
// m kRowStride: a walk down a column in steps of whole periods adds a
// constant (tile::RotaryHooks' prologue).
//   SwizzledRows<kCols>  rows of kCols elements (a multiple of 32), one after
//                        another (cp.async tiles of the sm80 kernels, P/dS
//                        scratch everywhere);
//   Chunked<kRows, kCols> kCols-column chunks of [kRows][2 kCols bytes], each
//                        1024-byte aligned: what a TMA box of kCols columns
//                        with a swizzle of the row's width writes (128 bytes
//                        for 64 columns, 64 bytes for 32), and what wgmma
//                        descriptors address (sm90 kernels).
#pragma once

#include <cstdint>

#include "tile/chunk_width.h"

namespace blockattn::tile {

template <int kCols>
struct SwizzledRows {
  static_assert(kCols % 32 == 0, "rows of a multiple of 32 columns (64 bytes)");
  static constexpr int kUnitsPerRow = kCols / 8;
  static constexpr int kRowStride = kCols, kSwizzlePeriod = 8;

  // Rows of a multiple of 128 bytes start on bank 0: XOR the unit index with
  // row % 8. Rows of an odd multiple of 64 bytes (32, 96, 160, 224 columns)
  // start alternately on bank 0 and bank 16, so rows 2i and 2i + 1 already
  // differ in the unit's bit 2: XOR its low two bits with the row pair's
  // index (which keeps the unit inside its aligned group of four, hence
  // inside the row).
  __device__ static __forceinline__ int offset(int row, int col) {
    const int swizzle = kCols % 64 == 0 ? (row & 7) : ((row >> 1) & 3);
    return row * kCols + ((((col >> 3) ^ swizzle)) << 3) + (col & 7);
  }
};

inline constexpr int kChunkRowBytes = 2 * kChunkCols;

// The swizzle TMA applies (and wgmma undoes) XORs the 16-byte unit index
// within a row with the row's position in the swizzle period: for 128-byte
// rows (128-byte swizzle) row % 8, for 64-byte rows (64-byte swizzle, two
// rows per 128 bytes) (row / 2) % 4: address bits [4, 4 + n) XOR bits
// [7, 7 + n) either way.
template <int kRows, int kCols = kChunkCols>
struct Chunked {
  static_assert(kCols == kChunkCols || kCols == kNarrowChunkCols, "128-byte or 64-byte chunk rows");
  static constexpr int kRowCount = kRows;
  static constexpr int kChunkColumns = kCols;
  static constexpr int kRowBytes = 2 * kCols;  // = the swizzle width
  static constexpr int kChunkElems = kRows * kCols;
  static constexpr int kChunkBytes = kRows * kRowBytes;
  static constexpr int kRowStride = kCols, kSwizzlePeriod = 8;  // (row / 2) % 4 for 64-byte rows: 8 rows too

  __device__ static __forceinline__ int offset(int row, int col) {
    const int in_chunk = col % kCols;
    const int swizzle = (row / (128 / kRowBytes)) % (kRowBytes / 16);  // the row's bits 7.. of its address
    return (col / kCols) * kChunkElems + row * kCols + (((in_chunk / 8) ^ swizzle) * 8) + in_chunk % 8;
  }
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// `raw` (a pointer into shared memory) advanced to the next 1024-byte
// boundary of the shared window, by pointer arithmetic on `raw` itself. A
// pointer rebuilt from an integer loses its address space: every access
// through it, and through whatever is derived from it, becomes a generic one
// (64-bit address arithmetic per access, ST/LD instead of STS/LDS): the sm90
// backward's staging of P, dS and the gradients ran 8% faster at D = 32 with
// shared-space accesses (docs/perf.md, "Shared-memory accesses that lost
// their space").
__device__ __forceinline__ unsigned char* align_shared_1024(unsigned char* raw) {
  return raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
}

// Byte address of (row, col) of a tile in the shared window.
template <typename Layout>
__device__ __forceinline__ uint32_t smem_addr(uint32_t base, int row, int col) {
  return base + 2u * static_cast<uint32_t>(Layout::offset(row, col));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Same, each matrix transposed on the way into registers.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

}  // namespace blockattn::tile
