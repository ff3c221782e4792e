// wgmma (sm_90a) for the attention tiles: shared-memory matrix descriptors
// for swizzled tiles, and the product shapes the kernels need.
// libcu++ has no wgmma wrapper, hence the inline PTX; everything here is
// issued by a whole warpgroup.
//
// Tiles have a tile::Chunked layout: chunks of [rows][one swizzle row] (what a
// TMA box of one swizzle row's width writes: 64 columns with 128-byte swizzle,
// or 32 with 64-byte swizzle where the backward reads exact boxes of a head
// that is not a multiple of 64), each chunk 1024-byte aligned so the
// descriptor's base offset stays 0. With R the row bytes:
//  - K-major operand (Q or K for S = Q K^T): one k16 step is 32 bytes further
//    along a row; R / 32 steps per chunk, then the next chunk. Stride byte
//    offset = 8 rows x R; the leading offset is unused.
//  - MN-major operand (V for O = P V, transposed B): one k16 step is 16 rows =
//    16 R bytes further; the leading offset (the next R / 2 N-columns) is the
//    chunk size, the stride offset (next 8 K-rows) 8 R.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tile/smem_layout.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "sm90/ sources are compiled for sm_90a only (wgmma, setmaxnreg)"
#endif

namespace blockattn::sm90 {

// A descriptor of a tile swizzled at the width of its kRowBytes rows, as its
// two 32-bit words, and at(bytes) the descriptor of the point `bytes` (a
// multiple of 16) into it. The start address field is bits 0-13 of the low
// word, (address & 0x3FFFF) >> 4, and shared-memory addresses stay below
// 256 KB, so an advance adds into the field without carrying out of it: a
// k16 step's descriptor is one add to the tile's, where masking, shifting
// and merging each step's address took four instructions a descriptor (and
// a dense D = 64 tile has twelve; docs/perf.md, "Session 43").
template <int kRowBytes>
struct SmemDesc {
  static_assert(kRowBytes == 128 || kRowBytes == 64, "128-byte or 64-byte swizzle");
  static constexpr uint32_t kLayoutType = kRowBytes == 128 ? 1 : 2;  // bits 62-63: 128-byte or 64-byte swizzle
  uint32_t lo, hi;

  __device__ __forceinline__ SmemDesc(uint32_t smem_addr, uint32_t leading_bytes, uint32_t stride_bytes)
      : lo(((smem_addr & 0x3FFFF) >> 4) | (((leading_bytes & 0x3FFFF) >> 4) << 16)),
        hi(((stride_bytes & 0x3FFFF) >> 4) | (kLayoutType << 30)) {}
  __device__ __forceinline__ uint64_t at(uint32_t advance_bytes) const {
    return (static_cast<uint64_t>(hi) << 32) | (lo + (advance_bytes >> 4));
  }
};

// A descriptor for a tile swizzled at the width of its kRowBytes rows.
template <int kRowBytes>
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t smem_addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  return SmemDesc<kRowBytes>(smem_addr, leading_bytes, stride_bytes).at(0);
}

// A tile's shared-memory address for the descriptors of the products that
// read it, through lane 0: the same value in every lane, but one ptxas knows
// is, so it builds the descriptors in uniform registers. From an address it
// cannot prove warp-uniform (a ring slot of a unit or tile read out of
// shared memory) it built each in ordinary registers and moved it into
// uniform ones before every wgmma: in the grouped backward, 60 moves and
// about as many instructions more a head (docs/perf.md, "Session 48").
__device__ __forceinline__ uint32_t operand_address(const void* tile) {
  return __shfl_sync(~0u, tile::smem_u32(tile), 0);
}

// Descriptor of k16 step `kk` of a K-major tile laid out as `Layout`.
template <typename Layout>
__device__ __forceinline__ uint64_t kmajor_desc(uint32_t tile_addr, int kk) {
  constexpr int kStepsPerChunk = Layout::kRowBytes / 32;
  return SmemDesc<Layout::kRowBytes>(tile_addr, 16, 8 * Layout::kRowBytes)
      .at((kk / kStepsPerChunk) * Layout::kChunkBytes + (kk % kStepsPerChunk) * 32);
}

// Descriptor of k16 step `kk` of an MN-major tile laid out as `Layout` (its
// rows are the K dimension).
template <typename Layout>
__device__ __forceinline__ uint64_t mnmajor_desc(uint32_t tile_addr, int kk) {
  return SmemDesc<Layout::kRowBytes>(tile_addr, Layout::kChunkBytes, 8 * Layout::kRowBytes)
      .at(kk * 16 * Layout::kRowBytes);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses to accumulator registers across the
// asynchronous window between a wgmma and its wait.
template <int kN>
__device__ __forceinline__ void fence_registers(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}
template <int kN>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
    asm volatile("" : "+r"(r[i])::"memory");
}

// accumulate = 0 overwrites D (D = A B), 1 adds to it.
//
// D[64 x kN] += A * B^T with A (64 x 16) and B (kN x 16) both K-major in
// shared memory (S = Q K^T). Accumulator layout: register 4j + e of lane l in
// warp w holds row 16w + l/4 + 8(e/2), column 8j + 2(l%4) + e%2.
template <typename T, int kN>
__device__ __forceinline__ void wgmma_ss(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b, int accumulate);

// D[64 x kN] += A * B with B (16 x kN) MN-major in shared memory and A
// (64 x 16) there too, K-major (kATransposed = false: dQ = dS K) or MN-major
// (true: dV = P^T dO and dK = dS^T Q with P and dS staged as [query][key]
// tiles; the grouped backward split by products, sm90/grouped_backward.cuh).
template <typename T, int kN, bool kATransposed>
__device__ __forceinline__ void wgmma_ss_mn(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b, int accumulate);

// D[64 x kN] += A * B with A (64 x 16) in registers (the mma.sync A-fragment
// layout per warp) and B (16 x kN) MN-major in shared memory (O = P V).
template <typename T, int kN>
__device__ __forceinline__ void wgmma_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc_b, int accumulate);

// The specializations differ only in the PTX type name and the operand
// numbering; the register lists are spelled out once per accumulator size.
#define BLOCKATTN_ACC32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define BLOCKATTN_ACC64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define BLOCKATTN_ACC32_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define BLOCKATTN_ACC64_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define BLOCKATTN_ACC40 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define BLOCKATTN_ACC40_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define BLOCKATTN_ACC88 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}"
#define BLOCKATTN_ACC88_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define BLOCKATTN_ACC128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define BLOCKATTN_ACC128_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

#define BLOCKATTN_WGMMA_SS_N64(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_ss<CppType, 64>(float(&d)[32], uint64_t desc_a, uint64_t desc_b, \
                                                        int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC32 \
                 ", %32, %33, p, 1, 1, 0, 0;\n}\n" \
                 : BLOCKATTN_ACC32_OPERANDS(d) \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_ACC16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define BLOCKATTN_ACC16_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define BLOCKATTN_WGMMA_RS_N32(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 32>(float(&d)[16], const uint32_t(&a)[4], uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %21, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC16 \
                 ", {%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC16_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_RS_N64(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 64>(float(&d)[32], const uint32_t(&a)[4], uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC32 \
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC32_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_RS_N128(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 128>(float(&d)[64], const uint32_t(&a)[4], uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC64 \
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC64_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_SS_N128(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_ss<CppType, 128>(float(&d)[64], uint64_t desc_a, uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC64 \
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n" \
                 : BLOCKATTN_ACC64_OPERANDS(d) \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_SS_MN_N128(CppType, PtxType, kATransposed, TransA) \
  template <> \
  __device__ __forceinline__ void wgmma_ss_mn<CppType, 128, kATransposed>(float(&d)[64], uint64_t desc_a, \
                                                                          uint64_t desc_b, int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC64 \
                 ", %64, %65, p, 1, 1, " TransA ", 1;\n}\n" \
                 : BLOCKATTN_ACC64_OPERANDS(d) \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_SS_N80(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_ss<CppType, 80>(float(&d)[40], uint64_t desc_a, uint64_t desc_b, \
                                                        int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %42, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n80k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC40 \
                 ", %40, %41, p, 1, 1, 0, 0;\n}\n" \
                 : BLOCKATTN_ACC40_OPERANDS(d) \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_SS_N176(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_ss<CppType, 176>(float(&d)[88], uint64_t desc_a, uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %90, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n176k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC88 \
                 ", %88, %89, p, 1, 1, 0, 0;\n}\n" \
                 : BLOCKATTN_ACC88_OPERANDS(d) \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)); \
  }

// N = 96 and 160: the sm90 backward's dV, dK and dQ at those head dims,
// read from exact 32-column chunks (sm90/params.h).
#define BLOCKATTN_ACC48 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define BLOCKATTN_ACC48_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define BLOCKATTN_WGMMA_RS_N96(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 96>(float(&d)[48], const uint32_t(&a)[4], uint64_t desc_b, \
                                                        int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %53, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n96k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC48 \
                 ", {%48, %49, %50, %51}, %52, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC48_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_ACC80 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}"
#define BLOCKATTN_ACC80_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define BLOCKATTN_WGMMA_RS_N160(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 160>(float(&d)[80], const uint32_t(&a)[4], uint64_t desc_b, \
                                                        int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %85, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n160k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC80 \
                 ", {%80, %81, %82, %83}, %84, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC80_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_ACC96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define BLOCKATTN_ACC96_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define BLOCKATTN_WGMMA_RS_N192(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 192>(float(&d)[96], const uint32_t(&a)[4], uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %101, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n192k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC96 \
                 ", {%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC96_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_ACC112 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111}"
#define BLOCKATTN_ACC112_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define BLOCKATTN_WGMMA_RS_N224(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 224>(float(&d)[112], const uint32_t(&a)[4], uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %117, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n224k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC112 \
                 ", {%112, %113, %114, %115}, %116, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC112_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

#define BLOCKATTN_WGMMA_RS_N256(CppType, PtxType) \
  template <> \
  __device__ __forceinline__ void wgmma_rs<CppType, 256>(float(&d)[128], const uint32_t(&a)[4], uint64_t desc_b, \
                                                         int accumulate) { \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %133, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." PtxType "." PtxType " " BLOCKATTN_ACC128 \
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n" \
                 : BLOCKATTN_ACC128_OPERANDS(d) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \
  }

BLOCKATTN_WGMMA_RS_N32(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N32(__half, "f16")
BLOCKATTN_WGMMA_SS_N64(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_SS_N64(__half, "f16")
BLOCKATTN_WGMMA_RS_N64(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N64(__half, "f16")
BLOCKATTN_WGMMA_RS_N128(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N128(__half, "f16")
BLOCKATTN_WGMMA_SS_N128(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_SS_N128(__half, "f16")
BLOCKATTN_WGMMA_SS_MN_N128(__nv_bfloat16, "bf16", false, "0")
BLOCKATTN_WGMMA_SS_MN_N128(__half, "f16", false, "0")
BLOCKATTN_WGMMA_SS_MN_N128(__nv_bfloat16, "bf16", true, "1")
BLOCKATTN_WGMMA_SS_MN_N128(__half, "f16", true, "1")
BLOCKATTN_WGMMA_SS_N80(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_SS_N80(__half, "f16")
BLOCKATTN_WGMMA_SS_N176(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_SS_N176(__half, "f16")
BLOCKATTN_WGMMA_RS_N96(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N96(__half, "f16")
BLOCKATTN_WGMMA_RS_N160(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N160(__half, "f16")
BLOCKATTN_WGMMA_RS_N192(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N192(__half, "f16")
BLOCKATTN_WGMMA_RS_N224(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N224(__half, "f16")  // rotary column-split backward, whole rows at D = 224
BLOCKATTN_WGMMA_RS_N256(__nv_bfloat16, "bf16")
BLOCKATTN_WGMMA_RS_N256(__half, "f16")

#undef BLOCKATTN_WGMMA_RS_N32
#undef BLOCKATTN_ACC16
#undef BLOCKATTN_ACC16_OPERANDS
#undef BLOCKATTN_WGMMA_SS_N64
#undef BLOCKATTN_WGMMA_RS_N64
#undef BLOCKATTN_WGMMA_RS_N128
#undef BLOCKATTN_WGMMA_SS_N128
#undef BLOCKATTN_WGMMA_SS_MN_N128
#undef BLOCKATTN_WGMMA_RS_N96
#undef BLOCKATTN_WGMMA_RS_N160
#undef BLOCKATTN_WGMMA_RS_N192
#undef BLOCKATTN_WGMMA_RS_N224
#undef BLOCKATTN_WGMMA_RS_N256
#undef BLOCKATTN_ACC112
#undef BLOCKATTN_ACC112_OPERANDS
#undef BLOCKATTN_WGMMA_SS_N80
#undef BLOCKATTN_WGMMA_SS_N176
#undef BLOCKATTN_ACC88
#undef BLOCKATTN_ACC88_OPERANDS
#undef BLOCKATTN_ACC40
#undef BLOCKATTN_ACC40_OPERANDS
#undef BLOCKATTN_ACC128
#undef BLOCKATTN_ACC48
#undef BLOCKATTN_ACC48_OPERANDS
#undef BLOCKATTN_ACC80
#undef BLOCKATTN_ACC80_OPERANDS
#undef BLOCKATTN_ACC96
#undef BLOCKATTN_ACC96_OPERANDS
#undef BLOCKATTN_ACC128_OPERANDS
#undef BLOCKATTN_ACC32
#undef BLOCKATTN_ACC64
#undef BLOCKATTN_ACC32_OPERANDS
#undef BLOCKATTN_ACC64_OPERANDS

// Issues D[64 x kN] = A * B^T over kK / 16 steps, A and B both K-major
// tiles in shared memory laid out as `Layout`, from their addresses (S = Q
// K^T, dP = dO V^T). Between wgmma_fence() and wgmma_commit(); the caller
// waits.
template <typename T, int kN, int kK, typename Layout>
__device__ __forceinline__ void issue_ss_product(float (&d)[kN / 2], uint32_t a_addr, uint32_t b_addr) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk)
    wgmma_ss<T, kN>(d, kmajor_desc<Layout>(a_addr, kk), kmajor_desc<Layout>(b_addr, kk), kk > 0);
}

}  // namespace blockattn::sm90
