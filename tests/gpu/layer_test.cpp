// Tests of the fused projection layer (blockattn/layer.h). The argument checks
// need no GPU; the accuracy tests compare out, dx, dW and db with an fp64
// reference of the unfused computation (project, attend, GEMM gradients) and
// skip, with the reason, where there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "blockattn/layer.h"
#include "common/test_seed.h"
#include "reference/reference.h"
#include "support/device_buffer.h"
#include "support/jagged_batch.h"

namespace blockattn {
namespace {

using testing::DeviceBuffer;

LayerForwardArgs valid_forward_args() {
  static std::vector<char> fake(1 << 10);  // aligned host bytes standing in for device pointers: never touched
  void* p = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(fake.data()) + 255) & ~uintptr_t{255});
  LayerForwardArgs a;
  a.shape = {2, 100, 64, 2, 2, 64, DType::kBF16, 64};
  a.offsets = static_cast<const int32_t*>(p);
  a.x = a.weight = a.bias = p;
  a.z = a.out = p;
  return a;
}

TEST(LayerValidation, NamesTheBadArgument) {
  auto expect_invalid = [](LayerForwardArgs a, const std::string& needle, size_t workspace_bytes = SIZE_MAX) {
    alignas(256) static char ws[256];
    const Status s = layer_forward(a, ws, workspace_bytes, nullptr);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message.find(needle), std::string::npos) << s.message;
  };
  LayerForwardArgs a = valid_forward_args();
  a.x = nullptr;
  expect_invalid(a, "x must not be null");
  a = valid_forward_args();
  a.weight = static_cast<const char*>(a.weight) + 2;
  expect_invalid(a, "weight must be 16-byte aligned");
  a = valid_forward_args();
  a.shape.in_features = 0;
  expect_invalid(a, "in_features");
  a = valid_forward_args();
  a.shape.num_kv_heads = 0;
  expect_invalid(a, "num_kv_heads");
  expect_invalid(valid_forward_args(), "layer_workspace_size()", 16);

  LayerBackwardArgs b;
  static_cast<LayerInputs&>(b) = valid_forward_args();
  b.dbias = nullptr;  // bias given, dbias missing
  alignas(256) static char ws[256];
  const Status s = layer_backward(b, ws, SIZE_MAX, nullptr);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message.find("dbias"), std::string::npos) << s.message;
}

// --------------------------------------------------------------------------- //
// Accuracy on the GPU
// --------------------------------------------------------------------------- //

template <typename T>
std::vector<T> random_values(size_t n, double scale, std::mt19937_64& rng, std::vector<double>& exact) {
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<T> stored(n);
  exact.resize(n);
  for (size_t i = 0; i < n; ++i) {
    stored[i] = testing::from_double<T>(dist(rng));
    exact[i] = testing::to_double(stored[i]);
  }
  return stored;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err2 += (got[i] - want[i]) * (got[i] - want[i]);
    ref2 += want[i] * want[i];
  }
  return std::sqrt(err2 / ref2);
}

template <typename T>
std::vector<double> download(const DeviceBuffer<T>& b) {
  std::vector<double> out;
  for (const T& x : b.download())
    out.push_back(testing::to_double(x));
  return out;
}

struct LayerCase {
  int in_features, num_q_heads, num_kv_heads, head_dim;
  bool bias;
};

template <typename T>
void check_layer(const LayerCase& c) {
  const std::string why = testing::gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  std::mt19937_64 rng = testing::test_rng();
  const std::vector<int32_t> lengths = {0, 1, 63, 64, 65, 130, 200, 7};
  std::vector<int32_t> offsets = {0};
  for (int32_t n : lengths)
    offsets.push_back(offsets.back() + n);
  const int64_t tokens = offsets.back(), channels = c.in_features;
  const int hq = c.num_q_heads, hkv = c.num_kv_heads, dim = c.head_dim;
  const int64_t width = int64_t{hq + 2 * hkv} * dim;

  std::vector<double> x64, w64, b64, dout64;
  auto x = random_values<T>(tokens * channels, 1.0, rng, x64);
  auto w = random_values<T>(width * channels, 1.0 / std::sqrt(double(channels)), rng, w64);
  auto b = random_values<T>(width, c.bias ? 0.1 : 0.0, rng, b64);
  auto dout = random_values<T>(tokens * hq * dim, 1.0, rng, dout64);

  DeviceBuffer<int32_t> d_offsets(offsets.size());
  DeviceBuffer<T> d_x(x.size()), d_w(w.size()), d_b(b.size()), d_dout(dout.size());
  DeviceBuffer<T> d_z(tokens * width), d_out(tokens * hq * dim), d_dz(tokens * width);
  DeviceBuffer<T> d_dx(x.size()), d_dw(w.size()), d_db(b.size());
  d_offsets.upload(offsets);
  d_x.upload(x), d_w.upload(w), d_b.upload(b), d_dout.upload(dout);
  for (auto* out : {&d_z, &d_out, &d_dz, &d_dx, &d_dw, &d_db})
    out->poison();
  DeviceBuffer<char> workspace(layer_workspace_size(lengths.size(), tokens));

  LayerForwardArgs fa;
  fa.shape = {int64_t(lengths.size()), tokens, c.in_features, hq, hkv, dim, testing::dtype_of<T>(), 64};
  fa.offsets = d_offsets.get();
  fa.x = d_x.get(), fa.weight = d_w.get(), fa.bias = c.bias ? d_b.get() : nullptr;
  fa.z = d_z.get(), fa.out = d_out.get();
  Status s = layer_forward(fa, workspace.get(), workspace.bytes(), nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  LayerBackwardArgs ba;
  static_cast<LayerInputs&>(ba) = fa;
  ba.options.reuse_schedule = true;
  ba.z = d_z.get(), ba.dout = d_dout.get(), ba.dz = d_dz.get();
  ba.dx = d_dx.get(), ba.dweight = d_dw.get(), ba.dbias = c.bias ? d_db.get() : nullptr;
  s = layer_backward(ba, workspace.get(), workspace.bytes(), nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  BA_CHECK_CUDA(cudaDeviceSynchronize());

  // fp64 reference: z = x W^T + b; q, k, v its column slices; attention; then
  // dx = dz W, dW = dz^T x, db = sum_t dz.
  std::vector<double> z(tokens * width);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < width; ++n) {
      double acc = b64[n];
      for (int64_t k = 0; k < channels; ++k)
        acc += x64[t * channels + k] * w64[n * channels + k];
      z[t * width + n] = acc;
    }
  auto slice = [&](const std::vector<double>& m, int first_head, int heads) {
    std::vector<double> out(tokens * heads * dim);
    for (int64_t t = 0; t < tokens; ++t)
      for (int i = 0; i < heads * dim; ++i)
        out[t * heads * dim + i] = m[t * width + first_head * dim + i];
    return out;
  };
  reference::Problem p;
  p.total_tokens = tokens, p.num_q_heads = hq, p.num_kv_heads = hkv, p.head_dim = dim, p.offsets = offsets;
  const auto q = slice(z, 0, hq), k = slice(z, hq, hkv), v = slice(z, hq + hkv, hkv);
  std::vector<double> out(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  reference::forward(p, q, k, v, out);
  reference::backward(p, q, k, v, dout64, dq, dk, dv);
  std::vector<double> dz(tokens * width), dx(tokens * channels, 0.0), dw(width * channels, 0.0), db(width, 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < width; ++n) {
      const int head = static_cast<int>(n / dim), d = static_cast<int>(n % dim);
      const auto& g = head < hq ? dq : head < hq + hkv ? dk : dv;
      const int h = head < hq ? head : head < hq + hkv ? head - hq : head - hq - hkv;
      const int heads = head < hq ? hq : hkv;
      dz[t * width + n] = g[(t * heads + h) * dim + d];
    }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < width; ++n) {
      const double g = dz[t * width + n];
      db[n] += g;
      for (int64_t k2 = 0; k2 < channels; ++k2) {
        dx[t * channels + k2] += g * w64[n * channels + k2];
        dw[n * channels + k2] += g * x64[t * channels + k2];
      }
    }

  // The kernels' tolerance (bf16 keeps 8 mantissa bits, fp16 11), although z
  // and dz add one rounding each at the input precision.
  const double tolerance = testing::dtype_of<T>() == DType::kBF16 ? 1e-2 : 2e-3;
  const struct {
    const char* name;
    std::vector<double> got, want;
  } results[] = {{"out", download(d_out), out}, {"dx", download(d_dx), dx}, {"dweight", download(d_dw), dw}};
  for (const auto& r : results) {
    const double err = rel_l2(r.got, r.want);
    std::printf("  %s rel_l2=%.3e\n", r.name, err);
    EXPECT_LE(err, tolerance) << r.name;  // NaN (an unwritten element) fails too
  }
  if (c.bias) {
    const double err = rel_l2(download(d_db), db);
    std::printf("  dbias rel_l2=%.3e\n", err);
    EXPECT_LE(err, tolerance) << "dbias";
  }
}

TEST(LayerGpu, Bf16GqaD64WithBias) { check_layer<__nv_bfloat16>({96, 4, 2, 64, true}); }
TEST(LayerGpu, Bf16D128NoBias) { check_layer<__nv_bfloat16>({64, 2, 2, 128, false}); }
TEST(LayerGpu, Fp16D64WithBias) { check_layer<__half>({128, 2, 2, 64, true}); }

}  // namespace
}  // namespace blockattn
