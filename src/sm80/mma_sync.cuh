// The sm_80 matrix and copy instructions: mma.sync m16n8k16 (fp32 accumulate)
// and cp.async. With ldmatrix (tile/smem_layout.cuh) these are the whole
// instruction vocabulary of the sm80 kernels.
//
// Fragment layouts (g = lane / 4, t = lane % 4), as the PTX ISA defines them:
//   A 16x16 (4 x b32): a0 (row g, k 2t..2t+1)  a1 (row g+8, k 2t..)
//                      a2 (row g, k 2t+8..)    a3 (row g+8, k 2t+8..)
//   B 16x8  (2 x b32): b0 (k 2t..2t+1, col g)  b1 (k 2t+8.., col g)
//   C 16x8  (4 x f32): c0,c1 (row g, cols 2t, 2t+1)  c2,c3 (row g+8, cols 2t, 2t+1)
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace blockattn::sm80 {

// C += A * B for one m16n8k16 tile.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                            uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16-byte asynchronous global->shared copy; src_bytes = 0 writes zeros and
// reads nothing, which is how rows past a block's end are filled.
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes));
}
// 8-byte asynchronous global->shared copy (.ca: .cg takes 16 bytes only),
// for small records whose tables are only 8-byte aligned.
__device__ __forceinline__ void cp_async_8(uint32_t smem_addr, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace blockattn::sm80
