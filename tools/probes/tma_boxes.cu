// Probe: TMA read throughput of [T, H, D] head tiles for head dims that are
// not a multiple of 64 columns. Question it answers (docs/perf.md, "Padded
// TMA boxes"): is the sm90 kernels' loss at D = 96/160/224 the half-empty last
// box (zero fill past D), the rows' 64-byte misalignment (head h starts at
// 2*D*h bytes), or neither?
//
// Each CTA streams (64-row block, head) tiles through a ring of stages, one
// thread issuing boxes and waiting; nothing computes. Modes per config:
//   pad:   every chunk a {64, 1, 64} box, 128-byte swizzle (today's loader);
//   exact: the last half chunk a {32, 1, 64} box, 64-byte swizzle;
//   rowmap: a 2D map over [T, H * D] (heads contiguous): every chunk a full
//           {64, 64} box at column h * D + 64 c, the padded half reading the
//           next head's first columns (zeros past the last head);
//   narrow: every chunk a {32, 1, 64} box, 64-byte swizzle (the sm90
//           backward's loader at D = 32, 96 and 160 since session 19). Its
//           question: is the D = 96 backward's 72% of copy (the D = 128
//           one's 93%) the narrow boxes, or the rows of [T, 5, 96] (960
//           bytes apart, odd heads starting mid-line)? Compare D = 96 and
//           D = 128 in this mode.
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -lcuda tools/probes/tma_boxes.cu
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cuda/ptx>
#include <vector>

namespace ptx = cuda::ptx;

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e = (x);                                                          \
    if (e != cudaSuccess) {                                                       \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));      \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

constexpr int kRows = 64;

__global__ void __launch_bounds__(32) stream_tiles(const __grid_constant__ CUtensorMap full_map,
                                                   const __grid_constant__ CUtensorMap half_map, int items, int heads,
                                                   int full_boxes, int half_box, int stages, int stage_bytes,
                                                   int row_map_d, int narrow_boxes) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + stages * stage_bytes);
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) ptx::mbarrier_init(&full[s], 1);
  ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  const uint32_t tx = (full_boxes * 64 + (half_box ? 32 : 0) + narrow_boxes * 32) * kRows * 2;
  int i = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x, ++i) {
    const int slot = i % stages;
    if (i >= stages)
      while (!ptx::mbarrier_try_wait_parity(&full[slot], static_cast<uint32_t>(((i / stages) - 1) & 1))) {
      }
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[slot], tx);
    const int block = item / heads, head = item % heads;
    unsigned char* dst = smem + slot * stage_bytes;
    for (int c = 0; c < full_boxes && row_map_d; ++c) {
      const int32_t at[2] = {head * row_map_d + c * 64, block * kRows};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + c * 64 * kRows * 2, &full_map, at,
                                &full[slot]);
    }
    for (int c = 0; c < full_boxes && !row_map_d; ++c) {
      const int32_t at[3] = {c * 64, head, block * kRows};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + c * 64 * kRows * 2, &full_map, at,
                                &full[slot]);
    }
    for (int c = 0; c < narrow_boxes; ++c) {
      const int32_t at[3] = {c * 32, head, block * kRows};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + c * 32 * kRows * 2, &half_map, at,
                                &full[slot]);
    }
    if (half_box) {
      const int32_t at[3] = {full_boxes * 64, head, block * kRows};
      ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + full_boxes * 64 * kRows * 2, &half_map,
                                at, &full[slot]);
    }
  }
  for (int j = (i > stages ? i - stages : 0); j < i; ++j)
    while (!ptx::mbarrier_try_wait_parity(&full[j % stages], static_cast<uint32_t>((j / stages) & 1))) {
    }
}

__global__ void fill(uint16_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint16_t>((i * 2654435761u) >> 7) & 0x3bff;
}

__global__ void copy(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

static PFN_cuTensorMapEncodeTiled_v12000 encode() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
}

static CUtensorMap make_map(void* data, int d, int heads, long tokens, int head_stride, int box_cols,
                            CUtensorMapSwizzle swizzle) {
  CUtensorMap m;
  const cuuint64_t dims[3] = {cuuint64_t(d), cuuint64_t(heads), cuuint64_t(tokens)};
  const cuuint64_t strides[2] = {cuuint64_t(head_stride) * 2, cuuint64_t(head_stride) * heads * 2};
  const cuuint32_t box[3] = {cuuint32_t(box_cols), 1, kRows};
  const cuuint32_t es[3] = {1, 1, 1};
  CUresult r = encode()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, data, dims, strides, box, es,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("encode failed (%d) d=%d box=%d\n", int(r), d, box_cols);
    std::exit(1);
  }
  return m;
}

static CUtensorMap make_row_map(void* data, int cols, long tokens) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(tokens)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * 2};
  const cuuint32_t box[2] = {64, kRows};
  const cuuint32_t es[2] = {1, 1};
  CUresult r = encode()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, data, dims, strides, box, es,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("row map encode failed (%d)\n", int(r));
    std::exit(1);
  }
  return m;
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t kBytes = size_t(1536) << 20;
  void *buf, *dst;
  CHECK(cudaMalloc(&buf, kBytes + (64 << 20)));
  CHECK(cudaMalloc(&dst, kBytes));
  fill<<<1024, 256>>>(static_cast<uint16_t*>(buf), (kBytes + (64 << 20)) / 2);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  float ms;
  copy<<<sms * 8, 512>>>(static_cast<int4*>(buf), static_cast<int4*>(dst), kBytes / 16);
  CHECK(cudaEventRecord(a));
  for (int r = 0; r < 5; ++r) copy<<<sms * 8, 512>>>(static_cast<int4*>(buf), static_cast<int4*>(dst), kBytes / 16);
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaEventElapsedTime(&ms, a, b));
  const double copy_gbs = 2.0 * kBytes * 5 / (ms * 1e6);
  std::printf("copy %.0f GB/s (read + write)\n", copy_gbs);

  struct Config { int d, heads, head_stride; };
  const Config configs[] = {{128, 4, 128}, {64, 8, 64}, {256, 2, 256}, {192, 3, 192}, {32, 16, 32}, {32, 16, 64},
                            {96, 5, 96},   {96, 5, 128}, {160, 3, 160}, {160, 3, 192}, {224, 2, 224}, {224, 2, 256}};
  std::printf("%-5s %-5s %-8s %-6s %-7s %9s %8s\n", "D", "H", "stride", "mode", "stages", "GB/s", "%copy");
  CHECK(cudaFuncSetAttribute(stream_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  for (const Config& c : configs) {
    const long tokens = long(kBytes / (size_t(c.heads) * c.head_stride * 2)) / kRows * kRows;
    const int full_boxes = c.d / 64, has_half = c.d % 64 != 0;
    const int padded_chunks = full_boxes + has_half;
    const int stage_bytes = padded_chunks * 64 * kRows * 2;
    const int stages = (192 * 1024) / stage_bytes;
    const int items = int(tokens / kRows) * c.heads;
    const CUtensorMap full_map = make_map(buf, c.d, c.heads, tokens, c.head_stride, 64, CU_TENSOR_MAP_SWIZZLE_128B);
    const CUtensorMap half_map = make_map(buf, c.d, c.heads, tokens, c.head_stride, 32, CU_TENSOR_MAP_SWIZZLE_64B);
    const CUtensorMap row_map = make_row_map(buf, c.heads * c.d, tokens);
    for (int mode = 0; mode < 4; ++mode) {
      if (mode == 1 && !has_half) continue;
      if (mode == 2 && c.head_stride != c.d) continue;
      const bool exact = mode == 1, narrow = mode == 3;
      const int fb = narrow ? 0 : exact ? full_boxes : padded_chunks;
      const int nb = narrow ? c.d / 32 : 0;
      const int hb = exact ? 1 : 0;
      const CUtensorMap& fm = mode == 2 ? row_map : full_map;
      const int row_map_d = mode == 2 ? c.d : 0;
      const int smem = stages * stage_bytes + stages * 8 + 1024;
      stream_tiles<<<sms, 32, smem>>>(fm, half_map, items, c.heads, fb, hb, stages, stage_bytes, row_map_d, nb);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(a));
      for (int r = 0; r < 5; ++r)
        stream_tiles<<<sms, 32, smem>>>(fm, half_map, items, c.heads, fb, hb, stages, stage_bytes, row_map_d, nb);
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaEventElapsedTime(&ms, a, b));
      const double useful = double(tokens) * c.heads * c.d * 2 * 5;
      const double gbs = useful / (ms * 1e6);
      std::printf("%-5d %-5d %-8d %-6s %-7d %9.0f %7.1f%%\n", c.d, c.heads, c.head_stride, mode == 3 ? "narrow" : mode == 2 ? "rowmap" : exact ? "exact" : "pad",
                  stages, gbs, 100.0 * gbs / copy_gbs);
    }
  }
  return 0;
}
