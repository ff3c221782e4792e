// The dense forward (blockattn/dense.h) against the fp64 reference on fresh
// random inputs: every built (backend, dtype, head dim) row, causal and not,
// S = 1 and lengths that are no multiple of any tile, grouped-query heads,
// strided and transposed layouts, the logsumexp output. Outputs are poisoned
// before each launch, and every element a call must not write (padding
// between rows) must still hold the poison afterwards. Skipped, with the
// reason printed, where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "blockattn/dense.h"
#include "common/test_seed.h"
#include "reference/dense_reference.h"
#include "support/device_buffer.h"
#include "support/jagged_batch.h"

namespace blockattn {
namespace {

using namespace blockattn::testing;

// How a [B, H, S, D] tensor sits in memory.
enum class DenseLayout {
  kBHSD,    // contiguous (B, H, S, D)
  kBSHD,    // (B, S, H, D) memory seen as (B, H, S, D): head stride D
  kPadded,  // (B, H, S, D) with gaps after every row and every head
};

struct DenseCase {
  int64_t batch, seq_len;
  int hq, hkv;
  bool causal;
  DenseLayout layout;
  bool lse;
  float scale = 0.f;        // softmax scale; 0: the default 1/sqrt(D)
  double key_growth = 0.0;  // key row s drawn times 1 + key_growth * s / S: scores that rise along the keys
};

struct View {
  int64_t batch_stride, head_stride, seq_stride, elems;
};

View view_of(DenseLayout layout, int64_t B, int H, int64_t S, int D) {
  switch (layout) {
    case DenseLayout::kBHSD:
      return {H * S * D, S * D, D, B * H * S * D};
    case DenseLayout::kBSHD:
      return {S * H * D, D, H * D, B * S * H * D};
    case DenseLayout::kPadded: {
      const int64_t row = D + 8, head = S * row + 16;
      return {H * head, head, row, B * H * head};
    }
  }
  return {};
}

size_t dense_index(int64_t b, int h, int64_t s, int d, int H, int64_t S, int D) {
  return static_cast<size_t>(((b * H + h) * S + s) * D + d);
}

// A device tensor of a layout and the exact values it holds, as fp64 [B, H, S, D].
template <typename T>
struct DeviceTensor {
  View view;
  DeviceBuffer<T> buffer;
  std::vector<double> values;

  DeviceTensor(DenseLayout layout, int64_t B, int H, int64_t S, int D)
      : view(view_of(layout, B, H, S, D)), buffer(static_cast<size_t>(view.elems)) {}

  size_t at(int64_t b, int h, int64_t s, int d) const {
    return static_cast<size_t>(b * view.batch_stride + h * view.head_stride + s * view.seq_stride + d);
  }
  DenseTensorView dense_view() const { return {buffer.get(), view.batch_stride, view.head_stride, view.seq_stride}; }

  // Normal values; row s times 1 + growth * s / S.
  void fill_random(std::mt19937_64& rng, int64_t B, int H, int64_t S, int D, double growth = 0.0) {
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<T> host(buffer.count(), from_double<T>(0.0));
    values.assign(static_cast<size_t>(B * H * S * D), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int d = 0; d < D; ++d) {
            const T x = from_double<T>(normal(rng) * (1.0 + growth * static_cast<double>(s) / static_cast<double>(S)));
            host[at(b, h, s, d)] = x;
            values[dense_index(b, h, s, d, H, S, D)] = to_double(x);
          }
    buffer.upload(host);
  }
};

int device_compute_capability() {
  cudaDeviceProp prop;
  BA_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  return prop.major * 10 + prop.minor;
}

// The built rows this GPU can run: every portable one, the sm_90 ones on 9.0.
std::vector<DenseKernelConfig> runnable_rows() {
  size_t n = 0;
  const DenseKernelConfig* rows = dense_configs(&n);
  std::vector<DenseKernelConfig> out;
  const bool hopper = device_compute_capability() == 90;
  for (size_t i = 0; i < n; ++i)
    if (rows[i].backend == Backend::kPortable || hopper) out.push_back(rows[i]);
  if (!hopper) std::printf("  (sm_90 path not tested: device is not compute capability 9.0)\n");
  return out;
}

double tolerance(DType dtype) { return dtype == DType::kBF16 ? 1e-2 : 2e-3; }

template <typename T>
void run_case(const DenseKernelConfig& row, const DenseCase& c, std::mt19937_64& rng) {
  const int D = row.head_dim;
  const int64_t B = c.batch, S = c.seq_len;
  DeviceTensor<T> q(c.layout, B, c.hq, S, D), k(c.layout, B, c.hkv, S, D), v(c.layout, B, c.hkv, S, D),
      out(c.layout, B, c.hq, S, D);
  q.fill_random(rng, B, c.hq, S, D);
  k.fill_random(rng, B, c.hkv, S, D, c.key_growth);
  v.fill_random(rng, B, c.hkv, S, D);
  DeviceBuffer<float> lse(static_cast<size_t>(B * c.hq * S));

  reference::DenseProblem rp{B, S, c.hq, c.hkv, D, c.causal, static_cast<double>(c.scale)};
  std::vector<double> ref, ref_lse;
  reference::dense_forward(rp, q.values, k.values, v.values, ref, &ref_lse);

  DenseForwardArgs a;
  a.shape = {B, S, c.hq, c.hkv, D, row.dtype};
  a.q = q.dense_view();
  a.k = k.dense_view();
  a.v = v.dense_view();
  a.out = out.dense_view();
  a.lse = c.lse ? lse.get() : nullptr;
  a.causal = c.causal;
  a.softmax_scale = c.scale;
  a.backend = row.backend;
  out.buffer.poison();
  lse.poison();
  const Status s = dense_forward(a, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  BA_CHECK_CUDA(cudaDeviceSynchronize());

  const std::vector<T> got = out.buffer.download();
  std::vector<char> owned(got.size(), 0);
  double err2 = 0, ref2 = 0, max_abs = 0;
  size_t nonfinite = 0, clobbered = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int d = 0; d < D; ++d) {
          const size_t at = out.at(b, h, i, d);
          owned[at] = 1;
          const double x = to_double(got[at]), r = ref[dense_index(b, h, i, d, c.hq, S, D)];
          if (!std::isfinite(x)) ++nonfinite;
          err2 += (x - r) * (x - r);
          ref2 += r * r;
          max_abs = std::max(max_abs, std::abs(x - r));
        }
  for (size_t i = 0; i < got.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &got[i], 2);
    if (!owned[i] && bits != 0xFFFF) ++clobbered;
  }
  const double rel_l2 = std::sqrt(err2 / std::max(ref2, 1e-300));
  double lse_err = 0;
  if (c.lse) {
    const std::vector<float> got_lse = lse.download();
    for (size_t i = 0; i < got_lse.size(); ++i)
      lse_err = std::max(lse_err, std::abs(got_lse[i] - ref_lse[i]) / std::max(1.0, std::abs(ref_lse[i])));
  }
  std::printf(
      "  %s %s d%d B%lld S%lld h%d/%d %s layout%d%s scale %g growth %g: rel_l2=%.2e max_abs=%.2e lse_err=%.1e\n",
      backend_name(row.backend), dtype_name(row.dtype), D, static_cast<long long>(B), static_cast<long long>(S), c.hq,
      c.hkv, c.causal ? "causal" : "full", static_cast<int>(c.layout), c.lse ? " +lse" : "",
      static_cast<double>(c.scale), c.key_growth, rel_l2, max_abs, lse_err);
  EXPECT_EQ(nonfinite, 0u);
  EXPECT_EQ(clobbered, 0u) << "writes outside the output rows";
  EXPECT_LE(rel_l2, tolerance(row.dtype));
  // The logsumexp is fp32 arithmetic on fp16/bf16 inputs (exactly the values
  // the reference reads): only accumulation order separates them.
  if (c.lse) EXPECT_LE(lse_err, 1e-4);
}

void run_cases(const std::vector<DenseCase>& cases) {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  std::mt19937_64 rng = test_rng();
  for (const DenseKernelConfig& row : runnable_rows())
    for (const DenseCase& c : cases) {
      if (row.dtype == DType::kBF16)
        run_case<__nv_bfloat16>(row, c, rng);
      else
        run_case<__half>(row, c, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(DenseForward, EdgeLengthsBothMasksEveryBuiltRow) {
  run_cases({
      {1, 1, 1, 1, false, DenseLayout::kBHSD, true},  // a single query and key
      {1, 1, 2, 1, true, DenseLayout::kBSHD, true},
      {2, 37, 2, 2, true, DenseLayout::kBHSD, true},  // shorter than any tile
      {1, 64, 2, 1, false, DenseLayout::kPadded, false},
      {1, 129, 4, 2, true, DenseLayout::kPadded, true},  // one past a 128-row unit
      {2, 200, 2, 1, false, DenseLayout::kBSHD, true},   // no multiple of 64 or 128
      {1, 300, 2, 2, true, DenseLayout::kBHSD, false},
      // Causal with S % 192 = 64 (hdim64_seq4k's remainder): on sm90 at
      // D = 64 row block 0 starts 128 rows before row 0, at D >= 128 no
      // shift; 520 % 128 = 8 shifts block 0 by 64 rows at D >= 128.
      {1, 448, 2, 1, true, DenseLayout::kBHSD, true},
      {1, 520, 2, 2, true, DenseLayout::kBSHD, true},
  });
}

// Scores that rise along the keys, so that a row's max climbs many times
// within one unit: the online softmax must move its running max and rescale
// the output accumulated so far each time (an optimization that skips the
// rescale when the max barely moves, docs/experiments/dense-lazy-rescale.patch,
// is what this guards). Key rows grow to 8x the first ones (scores up to ~24
// in natural units at the default scale), and a larger scale makes the climb
// steeper still.
TEST(DenseForward, RisingScoresMoveTheRunningMax) {
  run_cases({
      {1, 700, 2, 1, false, DenseLayout::kBHSD, true, 0.f, 7.0},
      {1, 700, 2, 2, true, DenseLayout::kBSHD, true, 0.f, 7.0},
      {2, 333, 2, 1, false, DenseLayout::kPadded, true, 0.5f, 3.0},
      {1, 1000, 1, 1, true, DenseLayout::kBHSD, true, 0.5f, 3.0},
  });
}

TEST(DenseForward, RandomShapes) {
  std::mt19937_64 rng = test_rng();
  std::uniform_int_distribution<int> len(1, 400), group(1, 3), kv(1, 2), pick(0, 2), coin(0, 1);
  std::vector<DenseCase> cases;
  for (int i = 0; i < 4; ++i) {
    const int hkv = kv(rng);
    cases.push_back({1 + coin(rng), len(rng), hkv * group(rng), hkv, coin(rng) == 1,
                     static_cast<DenseLayout>(pick(rng)), coin(rng) == 1});
  }
  run_cases(cases);
}

}  // namespace
}  // namespace blockattn
