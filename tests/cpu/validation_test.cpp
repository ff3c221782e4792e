// Argument validation: every rejected input returns kInvalidArgument with a
// message naming the argument, before anything touches the GPU (these tests run
// on machines without one: a launch attempt would show up as kCudaError).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "api/validate.h"
#include "blockattn/blockattn.h"
#include "blockattn/blockattn_c.h"
#include "core/problem.h"

namespace blockattn {
namespace {

// Fake, well-aligned addresses that are never dereferenced.
void* fake(uintptr_t i) { return reinterpret_cast<void*>(uintptr_t{1} << 40 | i << 30); }

constexpr int64_t kT = 1000;

// Most cases below are written for one configuration the default build has:
// bf16, head dim 128, 64-token blocks, forward and backward, no fusion. A
// build restricted to other head dims or block sizes (BLOCKATTN_HEAD_DIMS,
// BLOCKATTN_BLOCK_SIZES) would refuse their arguments for the head dim before
// reaching the argument under test, so they skip there, saying why;
// FollowsTheKernelTable checks whatever was built.
bool reference_config_built() {
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  bool forward = false, backward = false;
  for (size_t i = 0; i < n; ++i)
    if (rows[i].dtype == DType::kBF16 && rows[i].head_dim == 128 && rows[i].block_size == 64 && !rows[i].rotary) {
      forward |= rows[i].operation == Operation::kForward;
      backward |= rows[i].operation == Operation::kBackward;
    }
  return forward && backward;
}
#define REQUIRE_REFERENCE_CONFIG()                                                                    \
  if (!reference_config_built())                                                                      \
  GTEST_SKIP() << "this build has no bf16 head_dim 128 block_size 64 kernels (BLOCKATTN_HEAD_DIMS / " \
                  "BLOCKATTN_BLOCK_SIZES), which these cases are written for"

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
  BackwardArgs a;
  static_cast<AttentionInputs&>(a) = valid_forward();
  a.dout = {fake(6), 8 * 128, 128};
  a.dq = {fake(7), 8 * 128, 128};
  a.dk = {fake(8), 2 * 128, 128};
  a.dv = {fake(9), 2 * 128, 128};
  return a;
}

void* workspace() { return fake(10); }
size_t workspace_bytes() { return workspace_size(4, kT); }

template <typename Args>
bool valid(const Args& a) {
  const core::Problem p = core::describe(a);
  return api::validate_problem(p).ok() && api::validate_workspace(p, workspace(), workspace_bytes()).ok();
}

TEST(Validation, AcceptsValidArguments) {
  REQUIRE_REFERENCE_CONFIG();
  EXPECT_TRUE(valid(valid_forward()));
  EXPECT_TRUE(valid(valid_backward()));
  // Head-major layout and strided (padded) rows are fine too.
  ForwardArgs a = valid_forward();
  a.out = {fake(5), 128, kT * 128};
  a.q = {fake(2), 8 * 128 + 64, 136};
  EXPECT_TRUE(valid(a));
}

// Every head dim and block size of the kernel table is accepted, and the
// messages for others list what was built (read from the table, not repeated).
TEST(Validation, FollowsTheKernelTable) {
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  ASSERT_GT(n, 0u);
  for (size_t i = 0; i < n; ++i) {
    ForwardArgs a = valid_forward();
    a.shape.head_dim = rows[i].head_dim;
    a.shape.block_size = rows[i].block_size;
    a.q = a.out = {fake(2), 8 * int64_t{rows[i].head_dim}, rows[i].head_dim};
    a.out.data = fake(5);
    a.k = a.v = {fake(3), 2 * int64_t{rows[i].head_dim}, rows[i].head_dim};
    a.v.data = fake(4);
    EXPECT_TRUE(valid(a)) << "head_dim " << rows[i].head_dim << " block_size " << rows[i].block_size;
  }
  int smallest = rows[0].head_dim;
  for (size_t i = 0; i < n; ++i)
    smallest = std::min(smallest, rows[i].head_dim);
  ForwardArgs a = valid_forward();
  a.shape.head_dim = 40;
  const Status s = forward(a, workspace(), workspace_bytes(), nullptr);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  // The list starts with the smallest built head dim, whole (a build of one has no comma).
  const std::string want = "built head dims (" + std::to_string(smallest);
  const size_t at = s.message.find(want);
  ASSERT_NE(at, std::string::npos) << s.message;
  const char after = s.message[at + want.size()];
  EXPECT_TRUE(after == ',' || after == ')') << s.message;
}

// A valid rotary description on `a` (tables of 2048 positions), for cases to
// break one field of.
Rotary& with_rotary(ForwardArgs& a) {
  Rotary& r = a.rotary;
  r.rotary_dim = 128;
  r.cos = fake(11);
  r.sin = fake(12);
  r.cos_row_stride = r.sin_row_stride = 64;
  r.num_positions = 2048;
  return r;
}

// A combination the table does not build is refused even when the batch is
// empty (nothing would be launched), so that the refusal does not depend on
// the data: here the rotary backward past the head dims that have one.
TEST(Validation, EmptyBatchStillFollowsTheKernelTable) {
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  auto built = [&](Operation op, int d, bool rotary) {
    for (size_t i = 0; i < n; ++i)
      if (rows[i].operation == op && rows[i].head_dim == d && rows[i].rotary == rotary &&
          rows[i].dtype == DType::kBF16 && rows[i].block_size == kDefaultBlockSize)
        return true;
    return false;
  };
  int d = 0;
  for (size_t i = 0; i < n; ++i)
    if (built(Operation::kForward, rows[i].head_dim, true) && !built(Operation::kBackward, rows[i].head_dim, true))
      d = rows[i].head_dim;
  if (d == 0) GTEST_SKIP() << "every built head dim has a rotary backward";

  BackwardArgs a = valid_backward();
  a.shape.head_dim = d;
  a.shape.total_tokens = 0;
  for (TensorView* t : {&a.q, &a.dout, &a.dq})
    *t = {t->data, 8 * int64_t{d}, d};
  for (TensorView* t : {&a.k, &a.v, &a.dk, &a.dv})
    *t = {t->data, 2 * int64_t{d}, d};
  ASSERT_TRUE(backward(a, workspace(), workspace_bytes(), nullptr).ok());  // plain: built, nothing to do

  Rotary& r = a.rotary;
  r.rotary_dim = d;
  r.cos = fake(11);
  r.sin = fake(12);
  r.cos_row_stride = r.sin_row_stride = d / 2;
  r.num_positions = 2048;
  ForwardArgs f;
  static_cast<AttentionInputs&>(f) = a;
  f.out = {fake(5), 8 * int64_t{d}, d};
  EXPECT_TRUE(forward(f, workspace(), workspace_bytes(), nullptr).ok());  // the rotary forward is built
  const Status s = backward(a, workspace(), workspace_bytes(), nullptr);
  EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
  EXPECT_NE(s.message.find("this build has no backward kernel for bf16, head_dim " + std::to_string(d)),
            std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("with rotary"), std::string::npos) << s.message;
}

TEST(Validation, AcceptsRotary) {
  REQUIRE_REFERENCE_CONFIG();
  ForwardArgs a = valid_forward();
  with_rotary(a);
  EXPECT_TRUE(valid(a));
  a.rotary.pairs = RotaryPairs::kInterleaved;
  a.rotary.rotary_dim = 34;  // any even dim with interleaved pairs
  a.rotary.seq_start = static_cast<const int32_t*>(fake(13));
  EXPECT_TRUE(valid(a));
  a.rotary.num_positions = 0;  // nothing is read: tables may be null
  a.rotary.cos = a.rotary.sin = nullptr;
  EXPECT_TRUE(valid(a));
}

struct BadCase {
  const char* what;  // expected in the message
  std::function<void(ForwardArgs&)> mutate;
};

class ForwardValidation : public ::testing::TestWithParam<BadCase> {};

TEST_P(ForwardValidation, RejectsAndNamesTheArgument) {
  REQUIRE_REFERENCE_CONFIG();
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
    {"head_dim", [](ForwardArgs& a) { a.shape.head_dim = 72; }},
    {"block_size", [](ForwardArgs& a) { a.shape.block_size = 48; }},
    {"block_size", [](ForwardArgs& a) { a.shape.block_size = 0; }},
    {"dtype", [](ForwardArgs& a) { a.shape.dtype = static_cast<DType>(7); }},
    {"offsets", [](ForwardArgs& a) { a.offsets = nullptr; }},
    {"offsets must be 4-byte aligned",
     [](ForwardArgs& a) { a.offsets = reinterpret_cast<const int32_t*>(reinterpret_cast<uintptr_t>(fake(1)) + 2); }},
    {"softmax_scale", [](ForwardArgs& a) { a.options.softmax_scale = NAN; }},
    {"softmax_scale", [](ForwardArgs& a) { a.options.softmax_scale = INFINITY; }},
    {"softmax_scale", [](ForwardArgs& a) { a.options.softmax_scale = -0.5f; }},
    {"backend", [](ForwardArgs& a) { a.options.backend = static_cast<Backend>(9); }},
    {"q.data", [](ForwardArgs& a) { a.q.data = nullptr; }},
    {"k.data", [](ForwardArgs& a) { a.k.data = static_cast<char*>(a.k.data) + 8; }},
    {"v.token_stride", [](ForwardArgs& a) { a.v.token_stride = 2 * 128 + 4; }},
    {"q.head_stride", [](ForwardArgs& a) { a.q.head_stride = -128; }},
    {"out.data", [](ForwardArgs& a) { a.out.data = nullptr; }},
    {"out rows overlap", [](ForwardArgs& a) { a.out.head_stride = 64; }},
    {"out rows overlap", [](ForwardArgs& a) { a.out.token_stride = 128; }},
    {"out must not overlap input q", [](ForwardArgs& a) { a.out = a.q; }},
    // Rotary (with_rotary() is valid; each case breaks one field).
    {"rotary.rotary_dim", [](ForwardArgs& a) { with_rotary(a).rotary_dim = 130; }},
    {"rotary.rotary_dim", [](ForwardArgs& a) { with_rotary(a).rotary_dim = 63; }},
    {"rotary.rotary_dim", [](ForwardArgs& a) { with_rotary(a).rotary_dim = -2; }},
    {"multiple of 16 with kHalfSplit", [](ForwardArgs& a) { with_rotary(a).rotary_dim = 72; }},
    {"rotary.pairs", [](ForwardArgs& a) { with_rotary(a).pairs = static_cast<RotaryPairs>(5); }},
    {"rotary.positions", [](ForwardArgs& a) { with_rotary(a).positions = static_cast<RotaryPositions>(5); }},
    {"rotary.table_type", [](ForwardArgs& a) { with_rotary(a).table_type = static_cast<TableType>(5); }},
    {"rotary.num_positions", [](ForwardArgs& a) { with_rotary(a).num_positions = -1; }},
    {"rotary.cos", [](ForwardArgs& a) { with_rotary(a).cos = nullptr; }},
    {"rotary.sin must be aligned", [](ForwardArgs& a) { with_rotary(a).sin = static_cast<char*>(fake(12)) + 2; }},
    {"rotary.cos_row_stride", [](ForwardArgs& a) { with_rotary(a).cos_row_stride = -64; }},
    {"rotary.sin_row_stride", [](ForwardArgs& a) { with_rotary(a).sin_row_stride = int64_t{1} << 60; }},
    {"rotary.seq_start",
     [](ForwardArgs& a) {
       Rotary& r = with_rotary(a);
       r.positions = RotaryPositions::kTokenRow;
       r.seq_start = static_cast<const int32_t*>(fake(13));
     }},
    {"rotary.seq_start must be 4-byte aligned",
     [](ForwardArgs& a) {
       with_rotary(a).seq_start = reinterpret_cast<const int32_t*>(static_cast<char*>(fake(13)) + 2);
     }},
    {"out must not overlap rotary.cos", [](ForwardArgs& a) { with_rotary(a).cos = a.out.data; }},
};
// Readable case names: the index, then the expected message fragment.
std::string bad_case_name(const ::testing::TestParamInfo<BadCase>& info) {
  std::string name = std::to_string(info.index) + "_";
  for (const char* c = info.param.what; *c != '\0'; ++c)
    name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return name;
}
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.what; }

INSTANTIATE_TEST_SUITE_P(All, ForwardValidation, ::testing::ValuesIn(kBadForward), bad_case_name);

TEST(Validation, Workspace) {
  REQUIRE_REFERENCE_CONFIG();
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
  REQUIRE_REFERENCE_CONFIG();
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

blockattn_args c_args(const ForwardArgs& a) {
  auto t = [](const TensorView& v) { return blockattn_tensor{v.data, v.token_stride, v.head_stride}; };
  blockattn_args c = BLOCKATTN_ARGS_INIT;
  c.num_seqs = a.shape.num_seqs;
  c.total_tokens = a.shape.total_tokens;
  c.num_q_heads = a.shape.num_q_heads;
  c.num_kv_heads = a.shape.num_kv_heads;
  c.head_dim = a.shape.head_dim;
  c.dtype = BLOCKATTN_BF16;
  c.offsets = a.offsets;
  c.q = t(a.q);
  c.k = t(a.k);
  c.v = t(a.v);
  c.out = t(a.out);
  c.workspace = workspace();
  c.workspace_bytes = workspace_bytes();
  return c;
}

TEST(Validation, CAbiReportsTheMessage) {
  REQUIRE_REFERENCE_CONFIG();
  blockattn_args c = c_args(valid_forward());
  c.head_dim = 72;
  EXPECT_EQ(blockattn_forward(&c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("head_dim"), std::string::npos) << blockattn_last_error();
  c = c_args(valid_forward());
  c.block_size = 48;
  EXPECT_EQ(blockattn_forward(&c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("block_size"), std::string::npos) << blockattn_last_error();
  EXPECT_EQ(blockattn_forward(nullptr), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("args"), std::string::npos);
  EXPECT_EQ(blockattn_abi_version(), BLOCKATTN_C_ABI_VERSION);
}

// The size field: a struct too small for any version is refused; a caller
// built against a newer header (a larger struct) is read up to what this
// library knows. A null q.data makes each call fail at q's check, which shows
// that the struct was read as far as the tensors.
TEST(Validation, CAbiStructSize) {
  REQUIRE_REFERENCE_CONFIG();
  blockattn_args c = c_args(valid_forward());
  c.struct_size = sizeof(size_t);
  EXPECT_EQ(blockattn_forward(&c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("struct_size"), std::string::npos) << blockattn_last_error();

  struct Newer {
    blockattn_args v2;
    int64_t field_from_the_future;
  } newer{c_args(valid_forward()), 42};
  newer.v2.struct_size = sizeof(Newer);
  newer.v2.q.data = nullptr;
  EXPECT_EQ(blockattn_forward(&newer.v2), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("q.data"), std::string::npos) << blockattn_last_error();

  // block_size 0 means the default.
  c = c_args(valid_forward());
  c.block_size = 0;
  c.q.data = nullptr;
  EXPECT_EQ(blockattn_forward(&c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(blockattn_last_error()).find("q.data"), std::string::npos) << blockattn_last_error();
}

TEST(Validation, CAbiListsTheKernelTable) {
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  ASSERT_EQ(blockattn_config_count(), n);
  for (size_t i = 0; i < n; ++i) {
    blockattn_config c{};
    ASSERT_EQ(blockattn_config_at(i, &c), BLOCKATTN_OK);
    EXPECT_EQ(c.backend, static_cast<int32_t>(rows[i].backend));
    EXPECT_EQ(c.operation, static_cast<int32_t>(rows[i].operation));
    EXPECT_EQ(c.dtype, static_cast<int32_t>(rows[i].dtype));
    EXPECT_EQ(c.head_dim, rows[i].head_dim);
    EXPECT_EQ(c.block_size, rows[i].block_size);
    EXPECT_EQ(c.automatic != 0, rows[i].automatic);
  }
  blockattn_config c{};
  EXPECT_EQ(blockattn_config_at(n, &c), BLOCKATTN_INVALID_ARGUMENT);
  EXPECT_EQ(blockattn_tensor_alignment_bytes(), kTensorAlignmentBytes);
  EXPECT_EQ(blockattn_default_block_size(), kDefaultBlockSize);
}

}  // namespace
}  // namespace blockattn
