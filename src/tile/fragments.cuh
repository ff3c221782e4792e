// Register fragments of 16-row tiles and the arithmetic on them, shared by
// every kernel and architecture.
//
// The layout is the m16n8 C fragment of mma.sync, which is also what each warp
// of a warpgroup holds of a wgmma m64nN accumulator (its 16 rows): element
// c[j][e] of lane l is row l/4 + 8*(e/2), column 8j + 2*(l%4) + e%2. A thread
// holds parts of two rows; a row reduction is two shuffles within a quad.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace blockattn::tile {

// Two fp32 values rounded to one 32-bit register of 16-bit T (lo in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// The inverse: one 32-bit register of two T to fp32 (lo, hi).
template <typename T>
__device__ __forceinline__ void unpack2(uint32_t v, float& lo, float& hi);
template <>
__device__ __forceinline__ void unpack2<__nv_bfloat16>(uint32_t v, float& lo, float& hi) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  lo = f.x;
  hi = f.y;
}
template <>
__device__ __forceinline__ void unpack2<__half>(uint32_t v, float& lo, float& hi) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
  lo = f.x;
  hi = f.y;
}

// A 16 x kN fp32 accumulator: kN/8 C fragments.
template <int kN>
struct Accumulator {
  float c[kN / 8][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        c[j][e] = 0.f;
  }
  // The registers as one flat array, the operand list of a wgmma.
  __device__ __forceinline__ float (&regs())[kN / 2] { return reinterpret_cast<float(&)[kN / 2]>(c); }
};

// Column of element (j, e) for this lane.
__device__ __forceinline__ int fragment_col(int j, int e, int lane) { return 8 * j + 2 * (lane % 4) + (e & 1); }

// A 16 x kK 16-bit operand in registers: kK/16 A fragments (4 x b32 each).
template <int kK>
struct OperandA {
  uint32_t a[kK / 16][4];
};

// An fp32 accumulator's fragments have the A-fragment shape once adjacent
// column pairs are packed, so a product can feed the next one without a trip
// through shared memory.
template <typename T, int kN>
__device__ __forceinline__ OperandA<kN> to_operand(const Accumulator<kN>& acc) {
  OperandA<kN> op;
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk) {
    op.a[kk][0] = pack2<T>(acc.c[2 * kk][0], acc.c[2 * kk][1]);
    op.a[kk][1] = pack2<T>(acc.c[2 * kk][2], acc.c[2 * kk][3]);
    op.a[kk][2] = pack2<T>(acc.c[2 * kk + 1][0], acc.c[2 * kk + 1][1]);
    op.a[kk][3] = pack2<T>(acc.c[2 * kk + 1][2], acc.c[2 * kk + 1][3]);
  }
  return op;
}

// Sum and max over the four lanes of a quad, which together hold one row.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// Per-row factors of a thread's two rows (row lane/4 and lane/4 + 8).
struct RowScale {
  float row[2];
  __device__ static RowScale uniform(float s) { return {{s, s}}; }
};

}  // namespace blockattn::tile
