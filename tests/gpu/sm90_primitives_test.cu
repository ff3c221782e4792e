// GPU unit tests of the sm_90 primitives: a TMA round trip of a tile that runs
// past the tensor's end (zero fill), wgmma S = Q K^T with both operands
// K-major, and wgmma O = P V with P from registers and V transposed
// (MN-major), at D = 128 (two 64-column chunks, 128-byte swizzle) and D = 32
// (one 32-column chunk, 64-byte swizzle). Skipped off compute capability 9.0.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/test_seed.h"
#include "sm90/sync.cuh"
#include "sm90/tensor_map.h"
#include "sm90/wgmma.cuh"
#include "support/device_buffer.h"
#include "support/jagged_batch.h"
#include "tile/fragments.cuh"
#include "tile/smem_layout.cuh"

namespace blockattn {
namespace {

using namespace blockattn::testing;
using bf16 = __nv_bfloat16;
constexpr int kRows = 64;

// One warpgroup: TMA-loads Q, K, V tiles (rows [row_begin, row_begin + 64) of
// head `head`), copies Q back un-swizzled, computes S = Q K^T and O = bf16(S) V.
template <int kD>
__global__ void probe(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
                      const __grid_constant__ CUtensorMap vmap, int row_begin, int head, bf16* q_copy, float* s_out,
                      float* o_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Layout = tile::Chunked<kRows, tile::chunk_cols(kD)>;
  constexpr int kTileElems = kRows * kD, kChunkCols = Layout::kChunkColumns;
  extern __shared__ unsigned char raw[];
  bf16* tiles = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
  __shared__ sm90::Barrier bar;
  bf16 *q = tiles, *k = tiles + kTileElems, *v = tiles + 2 * kTileElems;
  const int tid = threadIdx.x, lane = tid % 32, row0 = 16 * (tid / 32);
  if (tid == 0) {
    bar.init(1);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    bar.arrive_expect_tx(3 * kTileElems * 2);
    for (int c = 0; c < kD / kChunkCols; ++c) {
      const int32_t at[3] = {kChunkCols * c, head, row_begin};
      const int to = c * Layout::kChunkElems;
      sm90::ptx::cp_async_bulk_tensor(sm90::ptx::space_cluster, sm90::ptx::space_global, q + to, &qmap, at, &bar.word);
      sm90::ptx::cp_async_bulk_tensor(sm90::ptx::space_cluster, sm90::ptx::space_global, k + to, &kmap, at, &bar.word);
      sm90::ptx::cp_async_bulk_tensor(sm90::ptx::space_cluster, sm90::ptx::space_global, v + to, &vmap, at, &bar.word);
    }
  }
  bar.wait(0);
  for (int i = tid; i < kTileElems; i += 128)
    q_copy[i] = q[Layout::offset(i / kD, i % kD)];

  tile::Accumulator<64> s;
  float(&s_regs)[32] = reinterpret_cast<float(&)[32]>(s.c);
  sm90::wgmma_fence();
  for (int kk = 0; kk < kD / 16; ++kk)
    sm90::wgmma_ss<bf16, 64>(s_regs, sm90::kmajor_desc<Layout>(tile::smem_u32(q), kk),
                             sm90::kmajor_desc<Layout>(tile::smem_u32(k), kk), kk > 0);
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  sm90::fence_registers(s_regs);
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 4; ++e)
      s_out[(row0 + lane / 4 + 8 * (e / 2)) * 64 + 8 * j + 2 * (lane % 4) + e % 2] = s.c[j][e];

  tile::OperandA<64> p = tile::to_operand<bf16>(s);
  tile::Accumulator<kD> o;
  float(&o_regs)[kD / 2] = reinterpret_cast<float(&)[kD / 2]>(o.c);
  sm90::wgmma_fence();
  for (int kk = 0; kk < 4; ++kk) {
    sm90::fence_registers(p.a[kk]);
    sm90::wgmma_rs<bf16, kD>(o_regs, p.a[kk], sm90::mnmajor_desc<Layout>(tile::smem_u32(v), kk), kk > 0);
  }
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  sm90::fence_registers(o_regs);
  for (int j = 0; j < kD / 8; ++j)
    for (int e = 0; e < 4; ++e)
      o_out[(row0 + lane / 4 + 8 * (e / 2)) * kD + 8 * j + 2 * (lane % 4) + e % 2] = o.c[j][e];
#endif
}

template <int kD>
void check_round_trip_and_products() {
  constexpr int kTileElems = kRows * kD;
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  cudaDeviceProp prop;
  BA_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (prop.major * 10 + prop.minor != 90)
    GTEST_SKIP() << "needs compute capability 9.0; device is " << prop.major << "." << prop.minor;

  // [T, H, D] tensors with T = 100 and a tile at rows 64..127: 36 real rows,
  // 28 past the end that TMA must zero-fill.
  const int T = 100, H = 3, head = 1, row_begin = 64;
  std::mt19937_64 rng = testing::test_rng();
  std::normal_distribution<double> dist;
  std::vector<bf16> hq(T * H * kD), hk(hq.size()), hv(hq.size());
  for (auto* t : {&hq, &hk, &hv})
    for (auto& x : *t)
      x = from_double<bf16>(dist(rng));
  DeviceBuffer<bf16> dq(hq.size()), dk(hk.size()), dv(hv.size()), q_copy(kTileElems);
  dq.upload(hq);
  dk.upload(hk);
  dv.upload(hv);
  DeviceBuffer<float> s_out(64 * 64), o_out(64 * kD);
  CUtensorMap maps[3];
  const char* err = nullptr;
  DeviceBuffer<bf16>* bufs[3] = {&dq, &dk, &dv};
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(sm90::encode_head_tile_map(&maps[i], TensorView{bufs[i]->get(), H * kD, kD}, DType::kBF16, T, H, kD,
                                           tile::chunk_cols(kD), 64, &err))
        << err;

  const int smem = 3 * kTileElems * 2 + 1024;
  BA_CHECK_CUDA(cudaFuncSetAttribute(probe<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  probe<kD><<<1, 128, smem>>>(maps[0], maps[1], maps[2], row_begin, head, q_copy.get(), s_out.get(), o_out.get());
  BA_CHECK_CUDA(cudaGetLastError());
  BA_CHECK_CUDA(cudaDeviceSynchronize());

  auto at = [&](const std::vector<bf16>& t, int r, int d) {
    return row_begin + r < T ? to_double(t[((row_begin + r) * H + head) * kD + d]) : 0.0;
  };
  const auto qc = q_copy.download();
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < kD; ++d)
      ASSERT_EQ(to_double(qc[r * kD + d]), at(hq, r, d)) << "TMA row " << r << " col " << d;

  const auto s = s_out.download();
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kRows; ++j) {
      double ref = 0;
      for (int d = 0; d < kD; ++d)
        ref += at(hq, i, d) * at(hk, j, d);
      ASSERT_NEAR(s[i * 64 + j], ref, 1e-4 * (1 + std::abs(ref))) << "S[" << i << "][" << j << "]";
    }
  const auto o = o_out.download();
  for (int i = 0; i < kRows; ++i)
    for (int d = 0; d < kD; ++d) {
      double ref = 0;
      for (int j = 0; j < kRows; ++j)
        ref += to_double(__float2bfloat16(s[i * 64 + j])) * at(hv, j, d);
      ASSERT_NEAR(o[i * kD + d], ref, 1e-4 * (1 + std::abs(ref))) << "O[" << i << "][" << d << "]";
    }
}

TEST(Sm90Primitives, TmaRoundTripAndWgmmaProducts128ByteSwizzle) { check_round_trip_and_products<128>(); }
TEST(Sm90Primitives, TmaRoundTripAndWgmmaProducts64ByteSwizzle) { check_round_trip_and_products<32>(); }

}  // namespace
}  // namespace blockattn
