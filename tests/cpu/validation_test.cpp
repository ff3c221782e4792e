// Argument validation: every rejected input returns kInvalidArgument with a
// message naming the argument, before anything touches the GPU (these tests run
// on machines without one: a launch attempt would show up as kCudaError).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "api/validate.h"
#include "blockattn/blockattn.h"
#include "blockattn/blockattn_c.h"

namespace blockattn {
namespace {

// Fake, well-aligned addresses that are never dereferenced.
void* fake(uintptr_t i) { return reinterpret_cast<void*>(uintptr_t{1} << 40 | i << 30); }

constexpr int64_t kT = 1000;

ForwardArgs valid_forward() {
  ForwardArgs a;
  a.shape = {/*num_seqs=*/4, /*total_tokens=*/kT, /*Hq=*/8, /*Hkv=*/2, /*D=*/128, DType::kBF16};
  a.offsets = static_cast<const int32_t*>(fake(1));
  a.q = {fake(2), 8 * 128, 128};
  a.k = {fake(3), 2 * 128, 128};
  a.v = {fake(4), 2 * 128, 128};
  a.out = {fake(5), 8 * 128, 128};
  return a;
}

BackwardArgs valid_backward() {
  const ForwardArgs f = valid_forward();
  BackwardArgs a;
  a.shape = f.shape;
  a.offsets = f.offsets;
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.dout = {fake(6), 8 * 128, 128};
  a.dq = {fake(7), 8 * 128, 128};
  a.dk = {fake(8), 2 * 128, 128};
  a.dv = {fake(9), 2 * 128, 128};
  return a;
}

void* workspace() { return fake(10); }
size_t workspace_bytes() { return workspace_size(4, kT); }

TEST(Validation, AcceptsValidArguments) {
  EXPECT_TRUE(validate_forward(valid_forward(), workspace(), workspace_bytes()).ok());
  EXPECT_TRUE(validate_backward(valid_backward(), workspace(), workspace_bytes()).ok());
  // Head-major layout and strided (padded) rows are fine too.
  ForwardArgs a = valid_forward();
  a.out = {fake(5), 128, kT * 128};
  a.q = {fake(2), 8 * 128 + 64, 136};
  EXPECT_TRUE(validate_forward(a, workspace(), workspace_bytes()).ok());
}

struct BadCase {
  const char* what;  // expected in the message
  std::function<void(ForwardArgs&)> mutate;
};

class ForwardValidation : public ::testing::TestWithParam<BadCase> {};

TEST_P(ForwardValidation, RejectsAndNamesTheArgument) {
  ForwardArgs a = valid_forward();
  GetParam().mutate(a);
  const Status s = forward(a, workspace(), workspace_bytes(), nullptr);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
  EXPECT_NE(s.message.find(GetParam().what), std::string::npos) << s.message;
}

const BadCase kBadForward[] = {
    {"num_seqs", [](ForwardArgs& a) { a.shape.num_seqs = -1; }},
    {"total_tokens", [](ForwardArgs& a) { a.shape.total_tokens = int64_t{1} << 31; }},
    {"num_q_heads", [](ForwardArgs& a) { a.shape.num_q_heads = 0; }},
    {"num_kv_heads", [](ForwardArgs& a) { a.shape.num_kv_heads = 0; }},
    {"multiple of num_kv_heads", [](ForwardArgs& a) { a.shape.num_kv_heads = 3; }},
    {"head_dim", [](ForwardArgs& a) { a.shape.head_dim = 96; }},
    {"dtype", [](ForwardArgs& a) { a.shape.dtype = static_cast<DType>(7); }},
    {"offsets", [](ForwardArgs& a) { a.offsets = nullptr; }},
    {"offsets must be 4-byte aligned",
     [](ForwardArgs& a) { a.offsets = reinterpret_cast<const int32_t*>(reinterpret_cast<uintptr_t>(fake(1)) + 2); }},
    {"softmax_scale", [](ForwardArgs& a) { a.options.softmax_scale = NAN; }},
    {"softmax_scale", [](ForwardArgs& a) { a.options.softmax_scale = INFINITY; }},
    {"backend", [](ForwardArgs& a) { a.options.backend = static_cast<Backend>(9); }},
    {"q.data", [](ForwardArgs& a) { a.q.data = nullptr; }},
    {"k.data", [](ForwardArgs& a) { a.k.data = static_cast<char*>(a.k.data) + 8; }},
    {"v.token_stride", [](ForwardArgs& a) { a.v.token_stride = 2 * 128 + 4; }},
    {"q.head_stride", [](ForwardArgs& a) { a.q.head_stride = -128; }},
    {"out.data", [](ForwardArgs& a) { a.out.data = nullptr; }},
    {"out rows overlap", [](ForwardArgs& a) { a.out.head_stride = 64; }},
    {"out rows overlap", [](ForwardArgs& a) { a.out.token_stride = 128; }},
    {"out must not overlap input q", [](ForwardArgs& a) { a.out = a.q; }},
};
INSTANTIATE_TEST_SUITE_P(All, ForwardValidation, ::testing::ValuesIn(kBadForward));

TEST(Validation, Workspace) {
  const ForwardArgs a = valid_forward();
  Status s = forward(a, nullptr, workspace_bytes(), nullptr);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message.find("workspace"), std::string::npos) << s.message;
  s = forward(a, workspace(), workspace_bytes() - 1, nullptr);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message.find("workspace_bytes"), std::string::npos) << s.message;
  s = forward(a, static_cast<char*>(workspace()) + 4, workspace_bytes(), nullptr);
  EXPECT_NE(s.message.find("workspace must be 16-byte aligned"), std::string::npos) << s.message;
}

TEST(Validation, BackwardNamesItsTensors) {
  struct Case {
    const char* what;
    std::function<void(BackwardArgs&)> mutate;
  };
  const Case cases[] = {
      {"dout.data", [](BackwardArgs& a) { a.dout.data = nullptr; }},
      {"dq.token_stride", [](BackwardArgs& a) { a.dq.token_stride = 12; }},
      {"dk rows overlap", [](BackwardArgs& a) { a.dk.head_stride = 8; }},
      {"dv must not overlap input v", [](BackwardArgs& a) { a.dv = a.v; }},
      {"dq must not overlap input dout", [](BackwardArgs& a) { a.dq = a.dout; }},
  };
  for (const Case& c : cases) {
    BackwardArgs a = valid_backward();
    c.mutate(a);
    const Status s = backward(a, workspace(), workspace_bytes(), nullptr);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(s.message.find(c.what), std::string::npos) << s.message;
  }
}

TEST(Validation, CAbiReportsTheMessage) {
  const ForwardArgs a = valid_forward();
  blockattn_problem p{4, kT, 8, 2, 96, BLOCKATTN_BF16, 0.f, BLOCKATTN_BACKEND_AUTO};
  auto t = [](const TensorView& v) { return blockattn_tensor{v.data, v.token_stride, v.head_stride}; };
  const blockattn_status s =
      blockattn_forward(&p, a.offsets, t(a.q), t(a.k), t(a.v), t(a.out), workspace(), workspace_bytes(), nullptr);
  EXPECT_EQ(s, BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("head_dim"), std::string::npos) << blockattn_last_error();
  EXPECT_EQ(
      blockattn_forward(nullptr, a.offsets, t(a.q), t(a.k), t(a.v), t(a.out), workspace(), workspace_bytes(), nullptr),
      BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("problem"), std::string::npos);
  EXPECT_EQ(blockattn_abi_version(), BLOCKATTN_C_ABI_VERSION);
}

}  // namespace
}  // namespace blockattn
