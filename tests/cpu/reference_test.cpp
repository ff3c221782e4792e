// The fp64 CPU reference against independent formulations: dense attention
// with a block-diagonal mask (forward) and finite differences (backward).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/test_seed.h"
#include "reference/reference.h"
#include "support/jagged_batch.h"

namespace blockattn {
namespace {

using testing::offsets_from_lengths;

std::vector<double> random_tensor(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> dist;
  std::vector<double> x(n);
  for (auto& e : x)
    e = dist(rng);
  return x;
}

reference::Problem make_problem(const std::vector<int32_t>& lengths, int hq, int hkv, int d) {
  reference::Problem p;
  p.offsets = offsets_from_lengths(lengths);
  p.total_tokens = p.offsets.back();
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = d;
  return p;
}

TEST(Reference, ForwardMatchesDenseBlockDiagonalMask) {
  std::mt19937_64 rng = testing::test_rng();
  const auto p = make_problem({0, 1, 63, 64, 65, 127, 128, 0, 200}, 4, 2, 64);
  const size_t nq = p.total_tokens * p.num_q_heads * p.head_dim, nk = p.total_tokens * p.num_kv_heads * p.head_dim;
  const auto q = random_tensor(nq, rng), k = random_tensor(nk, rng), v = random_tensor(nk, rng);
  std::vector<double> out(nq, NAN), dense(nq, NAN);
  reference::forward(p, q, k, v, out);
  reference::dense_masked_forward(p, q, k, v, dense);
  for (size_t i = 0; i < nq; ++i)
    ASSERT_NEAR(out[i], dense[i], 1e-12) << "element " << i;
}

TEST(Reference, ForwardHonoursExplicitScale) {
  std::mt19937_64 rng = testing::test_rng();
  auto p = make_problem({70}, 1, 1, 64);
  p.scale = 0.37;
  const size_t n = p.total_tokens * p.head_dim;
  const auto q = random_tensor(n, rng), k = random_tensor(n, rng), v = random_tensor(n, rng);
  std::vector<double> out(n), dense(n);
  reference::forward(p, q, k, v, out);
  reference::dense_masked_forward(p, q, k, v, dense);
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(out[i], dense[i], 1e-12);
}

// d/dx sum(out * dout) by central differences, on a sample of elements.
TEST(Reference, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng = testing::test_rng();
  const auto p = make_problem({3, 66, 17}, 4, 2, 64);
  const size_t nq = p.total_tokens * p.num_q_heads * p.head_dim, nk = p.total_tokens * p.num_kv_heads * p.head_dim;
  std::vector<double> q = random_tensor(nq, rng), k = random_tensor(nk, rng), v = random_tensor(nk, rng);
  const auto dout = random_tensor(nq, rng);
  std::vector<double> dq(nq), dk(nk), dv(nk);
  reference::backward(p, q, k, v, dout, dq, dk, dv);

  auto loss = [&] {
    std::vector<double> out(nq);
    reference::forward(p, q, k, v, out);
    double s = 0;
    for (size_t i = 0; i < nq; ++i)
      s += out[i] * dout[i];
    return s;
  };
  const double eps = 1e-5;
  struct Case {
    std::vector<double>* x;
    const std::vector<double>* grad;
    const char* name;
  };
  for (Case c : {Case{&q, &dq, "dq"}, Case{&k, &dk, "dk"}, Case{&v, &dv, "dv"}}) {
    std::uniform_int_distribution<size_t> pick(0, c.x->size() - 1);
    for (int trial = 0; trial < 60; ++trial) {
      const size_t i = pick(rng);
      const double saved = (*c.x)[i];
      (*c.x)[i] = saved + eps;
      const double up = loss();
      (*c.x)[i] = saved - eps;
      const double down = loss();
      (*c.x)[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR((*c.grad)[i], numeric, 1e-6 * (1 + std::abs(numeric))) << c.name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace blockattn
