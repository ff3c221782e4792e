// The dense forward's argument checks (blockattn/dense.h), which run on the
// host before anything touches the device: every bad argument is refused
// with its name in the message. No GPU needed: the pointers are never read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "blockattn/blockattn_c.h"
#include "blockattn/dense.h"
#include "core/dense_problem.h"

namespace blockattn {
namespace {

// A fake device address: validation compares and aligns pointers, never reads them.
void* fake(uintptr_t offset) { return reinterpret_cast<void*>(uintptr_t{1} << 32 | offset); }

// valid_args() describes head_dim 64: validation refuses a head dim that was
// not built before it looks further (a build restricted by
// BLOCKATTN_HEAD_DIMS may lack it).
#define REQUIRE_DENSE_D64()                     \
  if (!core::any_dense_kernel_has_head_dim(64)) \
  GTEST_SKIP() << "this build has no dense kernel at head_dim 64 (BLOCKATTN_HEAD_DIMS)"

DenseForwardArgs valid_args() {
  DenseForwardArgs a;
  a.shape = {2, 64, 4, 2, 64, DType::kBF16};
  const int64_t q_elems = 2 * 4 * 64 * 64, kv_elems = 2 * 2 * 64 * 64;
  a.q = {fake(0), 4 * 64 * 64, 64 * 64, 64};
  a.k = {fake(2 * q_elems), 2 * 64 * 64, 64 * 64, 64};
  a.v = {fake(2 * (q_elems + kv_elems)), 2 * 64 * 64, 64 * 64, 64};
  a.out = {fake(2 * (q_elems + 2 * kv_elems)), 4 * 64 * 64, 64 * 64, 64};
  return a;
}

// valid_args() changed by `spoil` must be refused with `needle` in the message.
template <typename Spoil>
void expect_invalid(Spoil spoil, const char* needle) {
  DenseForwardArgs a = valid_args();
  spoil(a);
  const Status s = dense_forward(a, nullptr);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << needle << ": " << s.message;
  EXPECT_NE(s.message.find(needle), std::string::npos) << s.message;
}

TEST(DenseValidation, EveryBadArgumentIsNamed) {
  REQUIRE_DENSE_D64();
  using Args = DenseForwardArgs;
  expect_invalid([](Args& a) { a.shape.head_dim = 96; }, "head_dim");
  expect_invalid([](Args& a) { a.shape.num_q_heads = 3; }, "num_q_heads");
  expect_invalid([](Args& a) { a.shape.num_kv_heads = 0; }, "num_kv_heads");
  expect_invalid([](Args& a) { a.shape.seq_len = -1; }, "seq_len");
  expect_invalid([](Args& a) { a.shape.seq_len = (int64_t{1} << 30) + 1; }, "seq_len");
  expect_invalid([](Args& a) { a.shape.batch = -2; }, "batch");
  expect_invalid([](Args& a) { a.shape.dtype = static_cast<DType>(7); }, "dtype");
  expect_invalid([](Args& a) { a.q.seq_stride = 65; }, "q.seq_stride");
  expect_invalid([](Args& a) { a.k.head_stride = -64; }, "k.head_stride");
  expect_invalid([](Args& a) { a.v.data = nullptr; }, "v.data");
  expect_invalid([](Args& a) { a.v.data = fake(2 * 2 * 4 * 64 * 64 + 2); }, "v.data");
  expect_invalid([](Args& a) { a.out.data = a.q.data; }, "out must not overlap input q");
  expect_invalid([](Args& a) { a.out.seq_stride = 32; }, "out rows overlap");
  expect_invalid([](Args& a) { a.out.head_stride = 0; }, "out rows overlap");
  // A multiple of 8 whose span passes 2^64 bytes.
  expect_invalid([](Args& a) { a.q.batch_stride = INT64_MAX - 7; }, "q strides reach past the address space");
  expect_invalid([](Args& a) { a.softmax_scale = -0.5f; }, "softmax_scale");
  expect_invalid([](Args& a) { a.softmax_scale = INFINITY; }, "softmax_scale");
  expect_invalid([](Args& a) { a.lse = static_cast<float*>(fake(2)); }, "lse must be 4-byte aligned");
  expect_invalid([](Args& a) { a.lse = static_cast<float*>(a.k.data); }, "lse must not overlap k");
  expect_invalid([](Args& a) { a.backend = static_cast<Backend>(9); }, "backend");
  expect_invalid(
      [](Args& a) {
        a.shape.batch = int64_t{1} << 20;
        a.shape.num_q_heads = a.shape.num_kv_heads = 64;
        a.shape.seq_len = 1 << 20;
      },
      "batch x num_q_heads");
}

TEST(DenseValidation, InputsMayAliasAndBroadcast) {
  REQUIRE_DENSE_D64();
  // Inputs are only read: q, k, v may share memory, and a zero stride
  // broadcasts (validation accepts it; kHopper then declines the layout).
  DenseForwardArgs a = valid_args();
  a.shape.num_q_heads = a.shape.num_kv_heads = 2;
  a.k = a.q;
  a.v = a.q;
  a.v.head_stride = 0;
  Backend chosen;
  const Status s = dense_forward_backend(a, &chosen);
  EXPECT_NE(s.code, StatusCode::kInvalidArgument) << s.message;
}

TEST(DenseValidation, TheCAbiReadsItsStructAndNamesArguments) {
  EXPECT_EQ(blockattn_dense_forward(nullptr), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("args"), std::string::npos);
  blockattn_dense_args c = BLOCKATTN_DENSE_ARGS_INIT;
  c.struct_size = 8;
  EXPECT_EQ(blockattn_dense_forward(&c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("struct_size"), std::string::npos);
  c = blockattn_dense_args{sizeof(blockattn_dense_args)};
  c.batch = 1;
  c.seq_len = 8;
  c.num_q_heads = c.num_kv_heads = 1;
  c.head_dim = 100;
  EXPECT_EQ(blockattn_dense_forward(&c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("head_dim"), std::string::npos);
}

TEST(DenseValidation, TheTableListsCausalAndFullKernelsPerHeadDim) {
  size_t n = 0;
  const DenseKernelConfig* rows = dense_configs(&n);
  if (n == 0) GTEST_SKIP() << "this build has no dense kernel (BLOCKATTN_HEAD_DIMS has no dense row)";
  EXPECT_EQ(blockattn_dense_config_count(), n);
  for (size_t i = 0; i < n; ++i) {
    blockattn_dense_config c;
    ASSERT_EQ(blockattn_dense_config_at(i, &c), BLOCKATTN_OK);
    EXPECT_EQ(c.head_dim, rows[i].head_dim);
    EXPECT_EQ(c.backend, static_cast<int32_t>(rows[i].backend));
  }
  blockattn_dense_config c;
  EXPECT_EQ(blockattn_dense_config_at(n, &c), BLOCKATTN_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace blockattn
