// GPU kernels against the fp64 CPU reference on fresh random jagged batches:
// fixed edge-case configurations (KernelTest, MalformedOffsets) and a seeded
// differential fuzzer over shapes, layouts, scales and offsets (Fuzz; the
// case count comes from BLOCKATTN_FUZZ_CASES or test_gpu --cases N).
// Skipped, with the reason printed, where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "blockattn/blockattn.h"
#include "common/test_seed.h"
#include "core/device_info.h"
#include "core/kernel_table.h"
#include "reference/reference.h"
#include "schedule/block_schedule.h"
#include "sm90/params.h"
#include "support/device_buffer.h"
#include "support/jagged_batch.h"
#include "support/late_copy.h"
#include "support/tensor_layout.h"

namespace blockattn {
namespace {

using namespace blockattn::testing;

#define REQUIRE_GPU()                                              \
  do {                                                             \
    const std::string why = gpu_unavailable_reason();              \
    if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why; \
  } while (0)

std::vector<int> built_head_dims();
std::vector<int> built_block_sizes(int head_dim = 0);
// Cases written for one head dim or block size skip, saying so, in a build
// restricted to others (BLOCKATTN_HEAD_DIMS, BLOCKATTN_BLOCK_SIZES); the
// parametrized suites cover what was built.
#define REQUIRE_BUILT(built_values, value, what, option)                           \
  do {                                                                             \
    const std::vector<int> built = (built_values);                                 \
    if (std::find(built.begin(), built.end(), (value)) == built.end())             \
      GTEST_SKIP() << what " " << (value) << " is not in this build (" option ")"; \
  } while (0)
#define REQUIRE_HEAD_DIM(d) REQUIRE_BUILT(built_head_dims(), d, "head_dim", "BLOCKATTN_HEAD_DIMS")
#define REQUIRE_BLOCK_SIZE(b) REQUIRE_BUILT(built_block_sizes(), b, "block_size", "BLOCKATTN_BLOCK_SIZES")

enum class OffsetsKind { kValid, kUnownedEdges, kMalformed };

// Rotary embeddings of a case (off when dim == 0). Tables hold random values
// (the rotation need not be orthogonal for the check) and end before the
// largest position, and sequence starts are partly negative, so positions
// outside the table (identity) occur in every case.
struct RotaryCase {
  int dim = 0;
  RotaryPairs pairs = RotaryPairs::kHalfSplit;
  RotaryPositions positions = RotaryPositions::kInSequence;
  bool rotate_v = false;
  bool seq_starts = false;   // kInSequence: a random start per sequence
  bool strided = false;      // one [P, r] table holding [sin | cos], two strided views
  bool table_fp32 = true;    // else the inputs' dtype
  bool padded_rows = false;  // separate tables whose rows are padded to 16 bytes (vector loads even where r/2 is odd)
};

struct Config {
  DType dtype;
  int head_dim, hq, hkv;
  LayoutKind layout;
  OffsetsKind offsets;
  float scale = 0.f;  // 0 = 1/sqrt(D)
  RotaryCase rotary{};
  int block_size = kDefaultBlockSize;
  bool far_first_keys = false;  // see FarFirstKeys
};

std::string config_string(const Config& c) {
  static const char* kinds[] = {"valid", "unownededges", "malformed"};
  static const char* layouts[] = {"packed", "padded", "headmajor"};
  std::string s = std::string(dtype_name(c.dtype)) + "_d" + std::to_string(c.head_dim) + "_hq" + std::to_string(c.hq) +
                  "_hkv" + std::to_string(c.hkv) + "_" + layouts[static_cast<int>(c.layout)] + "_" +
                  kinds[static_cast<int>(c.offsets)];
  if (c.scale != 0.f) s += "_scale" + std::to_string(static_cast<int>(c.scale * 1000)) + "e_3";
  if (c.block_size != kDefaultBlockSize) s += "_b" + std::to_string(c.block_size);
  if (c.far_first_keys) s += "_farfirstkeys";
  const RotaryCase& r = c.rotary;
  if (r.dim != 0)
    s += std::string("_rope") + std::to_string(r.dim) + (r.pairs == RotaryPairs::kHalfSplit ? "half" : "inter") +
         (r.positions == RotaryPositions::kInSequence ? (r.seq_starts ? "_seqstart" : "_seqpos") : "_rowpos") +
         (r.rotate_v ? "_qkv" : "_qk") + (r.strided ? "_strided" : "") + (r.table_fp32 ? "_f32" : "_t16") +
         (r.padded_rows ? "_padrows" : "");
  return s;
}
std::string config_name(const ::testing::TestParamInfo<Config>& info) { return config_string(info.param); }
void PrintTo(const Config& c, std::ostream* os) { *os << config_string(c); }

// Arguments over device tensors laid out as `ql` (query-head tensors) and
// `kl` (KV-head tensors).
ForwardArgs forward_args(const Shape& shape, const int32_t* offsets, const Layout& ql, const Layout& kl, void* q,
                         void* k, void* v, void* out) {
  ForwardArgs a;
  a.shape = shape;
  a.offsets = offsets;
  a.q = ql.view(q);
  a.k = kl.view(k);
  a.v = kl.view(v);
  a.out = ql.view(out);
  return a;
}

BackwardArgs backward_args(const ForwardArgs& f, const Layout& ql, const Layout& kl, void* dout, void* dq, void* dk,
                           void* dv) {
  BackwardArgs a;
  static_cast<AttentionInputs&>(a) = f;
  a.dout = ql.view(dout);
  a.dq = ql.view(dq);
  a.dk = kl.view(dk);
  a.dv = kl.view(dv);
  return a;
}

// Random N(0, 1) values rounded to T, kept both as T (device) and as exactly
// the same values in fp64 (reference), dense [T, H, D].
template <typename T>
struct HostTensor {
  Layout layout;
  std::vector<T> stored;
  std::vector<double> dense;

  HostTensor(const Layout& l, std::mt19937_64& rng) : layout(l), stored(l.elems()), dense(dense_size(l)) {
    std::normal_distribution<double> dist;
    for (auto& x : stored)
      x = from_double<T>(dist(rng));  // padding too: never read back as data
    for (int64_t t = 0; t < l.tokens; ++t)
      for (int h = 0; h < l.heads; ++h)
        for (int d = 0; d < l.dim; ++d)
          dense[dense_at(l, t, h, d)] = to_double(stored[l.at(t, h, d)]);
  }
  static size_t dense_size(const Layout& l) { return static_cast<size_t>(l.tokens) * l.heads * l.dim; }
  static size_t dense_at(const Layout& l, int64_t t, int h, int d) {
    return (static_cast<size_t>(t) * l.heads + h) * l.dim + d;
  }
};

// Where two runs' outputs differ, for a determinism failure's message: how
// many elements of the view, over how many tokens, and the first and largest
// differences with the reference's value (dense [T, H, D]), so that a race's
// footprint (a row, a tile, a head) and the run it hit show.
template <typename T>
std::string run_difference(const std::vector<T>& a, const std::vector<T>& b, const Layout& l,
                           const std::vector<double>& ref) {
  size_t elements = 0, tokens = 0;
  double largest = 0;
  std::string first, at_largest;
  for (int64_t t = 0; t < l.tokens; ++t) {
    bool token_differs = false;
    for (int h = 0; h < l.heads; ++h)
      for (int d = 0; d < l.dim; ++d) {
        const size_t i = l.at(t, h, d);
        if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
        const double x = to_double(a[i]), y = to_double(b[i]);
        const std::string where = "token " + std::to_string(t) + " head " + std::to_string(h) + " column " +
                                  std::to_string(d) + ": " + std::to_string(x) + " then " + std::to_string(y) +
                                  " (reference " + std::to_string(ref[HostTensor<T>::dense_at(l, t, h, d)]) + ")";
        if (elements++ == 0) first = where;
        if (!(std::fabs(x - y) <= largest)) largest = std::fabs(x - y), at_largest = where;
        token_differs = true;
      }
    tokens += token_differs;
  }
  if (elements == 0) return "the views agree; the difference lies in padding or rows outside the view";
  return std::to_string(elements) + " elements over " + std::to_string(tokens) + " tokens differ; first at " + first +
         "; largest at " + at_largest;
}

struct Accuracy {
  double rel_l2 = 0, max_abs = 0;
  size_t nonfinite = 0, clobbered = 0;  // NaN/inf in owned rows; writes outside them
};

// Compares owned rows with the reference and checks every other element of the
// allocation (unowned rows, padding) still holds the 0xFF poison.
template <typename T>
Accuracy compare(const std::vector<T>& got, const Layout& l, const std::vector<double>& ref,
                 const std::vector<schedule::BlockDesc>& blocks) {
  std::vector<char> owned(got.size(), 0);
  double err2 = 0, ref2 = 0;
  Accuracy a;
  for (const auto& b : blocks)
    for (int64_t t = b.row_begin; t < b.row_begin + b.row_count; ++t)
      for (int h = 0; h < l.heads; ++h)
        for (int d = 0; d < l.dim; ++d) {
          const size_t i = l.at(t, h, d);
          owned[i] = 1;
          const double x = to_double(got[i]), r = ref[HostTensor<T>::dense_at(l, t, h, d)];
          if (!std::isfinite(x)) ++a.nonfinite;
          err2 += (x - r) * (x - r);
          ref2 += r * r;
          a.max_abs = std::max(a.max_abs, std::abs(x - r));
        }
  for (size_t i = 0; i < got.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &got[i], 2);
    if (!owned[i] && bits != 0xFFFF) ++a.clobbered;
  }
  a.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return a;
}

// Lengths with every edge case, in random order, plus random ones.
std::vector<int32_t> test_lengths(std::mt19937_64& rng) {
  std::vector<int32_t> lengths = {0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 2048};
  std::uniform_int_distribution<int32_t> len(0, 300);
  for (int i = 0; i < 6; ++i)
    lengths.push_back(len(rng));
  std::shuffle(lengths.begin(), lengths.end(), rng);
  return lengths;
}

// Offsets for the config and the total token count they live in.
std::vector<int32_t> test_offsets(OffsetsKind kind, const std::vector<int32_t>& lengths, int64_t* total) {
  switch (kind) {
    case OffsetsKind::kValid: {
      auto o = offsets_from_lengths(lengths);
      *total = o.back();
      return o;
    }
    case OffsetsKind::kUnownedEdges: {  // rows before offsets[0] and after offsets[B] belong to nobody
      auto o = offsets_from_lengths(lengths, 5);
      *total = o.back() + 7;
      return o;
    }
    case OffsetsKind::kMalformed: {  // negative, decreasing, past the end
      auto o = offsets_from_lengths(lengths);
      *total = o.back();
      o[0] = -37;
      if (o.size() > 3) std::swap(o[1], o[2]);
      if (o.size() > 5) o[4] = static_cast<int32_t>(*total) + 1000;
      o.back() = static_cast<int32_t>(*total) - 3;
      return o;
    }
  }
  return {};
}

int device_compute_capability() {
  cudaDeviceProp prop;
  BA_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  return prop.major * 10 + prop.minor;
}

// Whether the device's memory peaks at 4 TB/s or more (an H200, not an
// H100): where kAuto prefers the sm_90 backward at head_dim 64 for every batch.
bool device_has_fast_memory() { return core::memory_peak_gbps() >= core::kFastMemoryGBps; }

// The portable path everywhere, plus the sm_90 path on compute capability 9.0;
// of those, the ones whose kernel table has this operation, dtype, head dim,
// block size and fusion.
std::vector<Backend> device_backends(Operation op, DType dtype, int head_dim, int block_size, bool rotary) {
  std::vector<Backend> backends = {Backend::kPortable};
  if (device_compute_capability() == 90)
    backends.push_back(Backend::kHopper);
  else
    std::printf("  (sm_90 path not tested: device is not compute capability 9.0)\n");
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  std::vector<Backend> built;
  for (Backend b : backends)
    for (size_t i = 0; i < n; ++i)
      if (rows[i].backend == b && rows[i].operation == op && rows[i].dtype == dtype && rows[i].head_dim == head_dim &&
          rows[i].block_size == block_size && rows[i].rotary == rotary) {
        built.push_back(b);
        break;
      }
  return built;
}

double tolerance(DType dtype) {
  // bf16 keeps 8 mantissa bits, fp16 11: P and the outputs are rounded once each.
  return dtype == DType::kBF16 ? 1e-2 : 2e-3;
}

// A case's rotary tables of random values in [-1, 1), on the device (rounded
// to the table type) and, with exactly those values, for the reference; the
// table ends before the longest position so some positions fall outside it.
struct DeviceRotary {
  reference::RotaryTables tables;
  Rotary rotary;
  std::unique_ptr<DeviceBuffer<unsigned char>> table_bytes;
  std::unique_ptr<DeviceBuffer<int32_t>> starts;

  DeviceRotary(const RotaryCase& rc, DType dtype, const std::vector<int32_t>& lengths, int64_t tokens, int64_t num_seqs,
               std::mt19937_64& rng) {
    tables.rotary_dim = rc.dim;
    tables.half_split = rc.pairs == RotaryPairs::kHalfSplit;
    tables.in_sequence = rc.positions == RotaryPositions::kInSequence;
    const int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
    const int64_t P = tables.num_positions =
        std::max<int64_t>(1, tables.in_sequence ? longest * 3 / 4 + 50 : tokens - 40);
    const int64_t half = rc.dim / 2;
    const TableType type =
        rc.table_fp32 ? TableType::kFloat32 : (dtype == DType::kBF16 ? TableType::kBF16 : TableType::kFP16);
    const int64_t elem = type == TableType::kFloat32 ? 4 : 2;
    // Separate [P, half] tables cos then sin (rows padded to a multiple of 16
    // bytes with padded_rows), or one [P, 2 half + 8] table [sin | cos | pad]
    // read as two strided views.
    const int64_t row = rc.padded_rows ? (half * elem + 15) / 16 * 16 / elem : half;
    const int64_t stride = rc.strided ? 2 * half + 8 : row;
    const int64_t cos_at = rc.strided ? half : 0, sin_at = rc.strided ? 0 : P * row;
    std::vector<unsigned char> bytes(static_cast<size_t>((rc.strided ? P * stride : 2 * P * row) * elem));
    // Stores x rounded to the table type; returns the stored value.
    auto store = [&](int64_t at, double x) {
      unsigned char* dst = &bytes[static_cast<size_t>(at) * elem];
      if (type == TableType::kFloat32) {
        const float f = static_cast<float>(x);
        std::memcpy(dst, &f, 4);
        return double{f};
      }
      if (type == TableType::kBF16) {
        const __nv_bfloat16 h = from_double<__nv_bfloat16>(x);
        std::memcpy(dst, &h, 2);
        return to_double(h);
      }
      const __half h = from_double<__half>(x);
      std::memcpy(dst, &h, 2);
      return to_double(h);
    };
    std::uniform_real_distribution<double> value(-1.0, 1.0);
    for (int64_t pos = 0; pos < P; ++pos)
      for (int64_t j = 0; j < half; ++j) {
        tables.cos.push_back(store(cos_at + pos * stride + j, value(rng)));
        tables.sin.push_back(store(sin_at + pos * stride + j, value(rng)));
      }
    table_bytes = std::make_unique<DeviceBuffer<unsigned char>>(bytes.size());
    table_bytes->upload(bytes);
    if (rc.seq_starts) {
      std::uniform_int_distribution<int32_t> start(-30, 200);
      for (int64_t b = 0; b < num_seqs; ++b)
        tables.seq_start.push_back(start(rng));
      starts = std::make_unique<DeviceBuffer<int32_t>>(tables.seq_start.size());
      starts->upload(tables.seq_start);
    }
    rotary.rotary_dim = rc.dim;
    rotary.pairs = rc.pairs;
    rotary.positions = rc.positions;
    rotary.rotate_v = rc.rotate_v;
    rotary.cos = table_bytes->get() + cos_at * elem;
    rotary.sin = table_bytes->get() + sin_at * elem;
    rotary.cos_row_stride = rotary.sin_row_stride = stride;
    rotary.num_positions = P;
    rotary.table_type = type;
    rotary.seq_start = rc.seq_starts ? starts->get() : nullptr;
  }
};

// For FarFirstKeys: column 0 of K is -32 at each block's first key and 0 at
// every other, and column 0 of Q is 32 at about one query row in 50 (every
// head), 0 elsewhere. Those rows score their block's first key 1024 below
// the rest (184 binary orders after the default scale at D = 64): it gets
// no weight, and a softmax shifted by that key's score overflows
// (tile::RowShift); every other row's scores keep N(0, 1) inputs' spread.
// About a quarter of 64-row tiles hold no such row.
template <typename T>
void push_first_keys_far_below(HostTensor<T>& q, HostTensor<T>& k, const std::vector<schedule::BlockDesc>& blocks,
                               std::mt19937_64& rng) {
  auto set = [](HostTensor<T>& x, int64_t t, double value) {
    for (int h = 0; h < x.layout.heads; ++h) {
      x.stored[x.layout.at(t, h, 0)] = from_double<T>(value);
      x.dense[HostTensor<T>::dense_at(x.layout, t, h, 0)] = value;
    }
  };
  std::uniform_int_distribution<int> one_in(0, 49);
  for (int64_t t = 0; t < q.layout.tokens; ++t) {
    set(k, t, 0.0);
    set(q, t, one_in(rng) == 0 ? 32.0 : 0.0);
  }
  for (const auto& b : blocks)
    if (b.row_count > 0) set(k, b.row_begin, -32.0);
}

// For OffsetsKind::kUnownedEdges: the rows no sequence owns (before
// offsets[0], from offsets[B] on) hold NaN in every head and column. The
// rows after the last sequence lie in its last tile, past its block's end,
// where a kernel must zero or mask what it loaded (0 * NaN is NaN): no owned
// row's result may see them.
template <typename T>
void fill_unowned_rows_with_nan(HostTensor<T>& x, const std::vector<int32_t>& offsets) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t t = 0; t < x.layout.tokens; ++t) {
    if (t >= offsets.front() && t < offsets.back()) continue;
    for (int h = 0; h < x.layout.heads; ++h)
      for (int d = 0; d < x.layout.dim; ++d) {
        x.stored[x.layout.at(t, h, d)] = from_double<T>(nan);
        x.dense[HostTensor<T>::dense_at(x.layout, t, h, d)] = nan;
      }
  }
}

// Forward and backward of one configuration on the given sequence lengths, on
// every path this GPU has, against the fp64 reference.
template <typename T>
void run_case(const Config& c, const std::vector<int32_t>& lengths, std::mt19937_64& rng) {
  REQUIRE_HEAD_DIM(c.head_dim);
  int64_t tokens = 0;
  reference::Problem ref;
  ref.offsets = test_offsets(c.offsets, lengths, &tokens);
  ref.total_tokens = tokens;
  ref.num_q_heads = c.hq;
  ref.num_kv_heads = c.hkv;
  ref.head_dim = c.head_dim;
  ref.scale = c.scale;
  ref.block_size = c.block_size;
  const auto blocks = reference::block_schedule(ref.offsets, static_cast<int32_t>(tokens), c.block_size);
  const int64_t num_seqs = static_cast<int64_t>(ref.offsets.size()) - 1;

  const Layout ql = make_layout(tokens, c.hq, c.head_dim, c.layout);
  const Layout kl = make_layout(tokens, c.hkv, c.head_dim, c.layout);
  HostTensor<T> q(ql, rng), k(kl, rng), v(kl, rng), dout(ql, rng);
  if (c.far_first_keys) push_first_keys_far_below(q, k, blocks, rng);
  if (c.offsets == OffsetsKind::kUnownedEdges)
    for (HostTensor<T>* x : {&q, &k, &v, &dout})
      fill_unowned_rows_with_nan(*x, ref.offsets);

  DeviceBuffer<T> dq_in(ql.elems()), dk_in(kl.elems()), dv_in(kl.elems()), ddout(ql.elems());
  dq_in.upload(q.stored);
  dk_in.upload(k.stored);
  dv_in.upload(v.stored);
  ddout.upload(dout.stored);
  DeviceBuffer<int32_t> offsets(ref.offsets.size());
  offsets.upload(ref.offsets);
  DeviceBuffer<unsigned char> workspace(workspace_size(num_seqs, tokens));

  const Shape shape{num_seqs, tokens, c.hq, c.hkv, c.head_dim, c.dtype, c.block_size};

  // Rotary: the kernels must equal rotate -> attend -> rotate back.
  std::vector<double> qr = q.dense, kr = k.dense, vr = v.dense;
  std::unique_ptr<DeviceRotary> rotary_tables;
  Rotary rotary;  // off unless the case has rotary
  if (c.rotary.dim != 0) {
    rotary_tables = std::make_unique<DeviceRotary>(c.rotary, c.dtype, lengths, tokens, num_seqs, rng);
    rotary = rotary_tables->rotary;
    reference::rotate(ref, rotary_tables->tables, c.hq, false, qr);
    reference::rotate(ref, rotary_tables->tables, c.hkv, false, kr);
    if (c.rotary.rotate_v) reference::rotate(ref, rotary_tables->tables, c.hkv, false, vr);
  }

  // Forward on every path this GPU has, twice each into poisoned outputs:
  // accuracy, untouched rows, determinism.
  std::vector<double> ref_out(q.dense.size());
  reference::forward(ref, qr, kr, vr, ref_out);
  const bool rotated = rotary_tables != nullptr;
  for (Backend backend : device_backends(Operation::kForward, c.dtype, c.head_dim, c.block_size, rotated)) {
    std::vector<T> outs[2];
    for (auto& host_out : outs) {
      DeviceBuffer<T> out(ql.elems());
      out.poison();
      ForwardArgs a = forward_args(shape, offsets.get(), ql, kl, dq_in.get(), dk_in.get(), dv_in.get(), out.get());
      a.options = {c.scale, backend};
      a.rotary = rotary;
      const Status s = forward(a, workspace.get(), workspace.bytes(), nullptr);
      ASSERT_TRUE(s.ok()) << s.message;
      BA_CHECK_CUDA(cudaDeviceSynchronize());
      host_out = out.download();
    }
    const char* path = backend == Backend::kHopper ? "hopper" : "portable";
    const Accuracy fa = compare(outs[0], ql, ref_out, blocks);
    std::printf("  forward (%s) rel_l2=%.3e max_abs=%.3e\n", path, fa.rel_l2, fa.max_abs);
    EXPECT_EQ(fa.nonfinite, 0u) << path;
    EXPECT_EQ(fa.clobbered, 0u) << path << ": elements outside every block were written";
    EXPECT_LE(fa.rel_l2, tolerance(c.dtype)) << path;
    EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(T)))
        << path << " forward not deterministic: " << run_difference(outs[0], outs[1], ql, ref_out);
  }

  // Backward on every path, twice each.
  std::vector<double> rdq(q.dense.size()), rdk(k.dense.size()), rdv(v.dense.size());
  reference::backward(ref, qr, kr, vr, dout.dense, rdq, rdk, rdv);
  if (rotary_tables) {  // gradients of the unrotated inputs
    reference::rotate(ref, rotary_tables->tables, c.hq, true, rdq);
    reference::rotate(ref, rotary_tables->tables, c.hkv, true, rdk);
    if (c.rotary.rotate_v) reference::rotate(ref, rotary_tables->tables, c.hkv, true, rdv);
  }
  const std::vector<Backend> backward_paths =
      device_backends(Operation::kBackward, c.dtype, c.head_dim, c.block_size, rotated);
  if (backward_paths.empty()) {  // a combination the table does not build: a clear refusal, nothing written
    DeviceBuffer<T> dq(ql.elems()), dk(kl.elems()), dv(kl.elems());
    BackwardArgs a =
        backward_args(forward_args(shape, offsets.get(), ql, kl, dq_in.get(), dk_in.get(), dv_in.get(), nullptr), ql,
                      kl, ddout.get(), dq.get(), dk.get(), dv.get());
    a.options = {c.scale, Backend::kAuto};
    a.rotary = rotary;
    const Status s = backward(a, workspace.get(), workspace.bytes(), nullptr);
    EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
    EXPECT_NE(s.message.find("head_dim " + std::to_string(c.head_dim)), std::string::npos) << s.message;
  }
  for (Backend backend : backward_paths) {
    const char* path = backend == Backend::kHopper ? "hopper" : "portable";
    auto run = [&](DeviceBuffer<T>& dq, DeviceBuffer<T>& dk, DeviceBuffer<T>& dv) {
      BackwardArgs a =
          backward_args(forward_args(shape, offsets.get(), ql, kl, dq_in.get(), dk_in.get(), dv_in.get(), nullptr), ql,
                        kl, ddout.get(), dq.get(), dk.get(), dv.get());
      a.options = {c.scale, backend};
      a.rotary = rotary;
      return backward(a, workspace.get(), workspace.bytes(), nullptr);
    };
    // The sm_90 grouped-query backward exists where sm90/params.h says; the
    // other grouped backwards are refused there, with a reason.
    if (backend == Backend::kHopper && c.hq != c.hkv &&
        !sm90::grouped_backward_kernel(c.head_dim, c.block_size, rotated)) {
      DeviceBuffer<T> dq(ql.elems()), dk(kl.elems()), dv(kl.elems());
      const Status s = run(dq, dk, dv);
      EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
      EXPECT_NE(s.message.find("num_q_heads != num_kv_heads"), std::string::npos) << s.message;
      continue;
    }
    std::vector<T> grads[2][3];
    for (auto& g : grads) {
      DeviceBuffer<T> dq(ql.elems()), dk(kl.elems()), dv(kl.elems());
      dq.poison();
      dk.poison();
      dv.poison();
      const Status s = run(dq, dk, dv);
      ASSERT_TRUE(s.ok()) << s.message;
      BA_CHECK_CUDA(cudaDeviceSynchronize());
      g[0] = dq.download();
      g[1] = dk.download();
      g[2] = dv.download();
    }
    const char* names[3] = {"dq", "dk", "dv"};
    const Layout* layouts[3] = {&ql, &kl, &kl};
    const std::vector<double>* refs[3] = {&rdq, &rdk, &rdv};
    for (int i = 0; i < 3; ++i) {
      const Accuracy ga = compare(grads[0][i], *layouts[i], *refs[i], blocks);
      std::printf("  %s (%s) rel_l2=%.3e max_abs=%.3e\n", names[i], path, ga.rel_l2, ga.max_abs);
      EXPECT_EQ(ga.nonfinite, 0u) << path << " " << names[i];
      EXPECT_EQ(ga.clobbered, 0u) << path << " " << names[i] << ": elements outside every block were written";
      EXPECT_LE(ga.rel_l2, tolerance(c.dtype)) << path << " " << names[i];
      EXPECT_EQ(0, std::memcmp(grads[0][i].data(), grads[1][i].data(), grads[0][i].size() * sizeof(T)))
          << path << " " << names[i]
          << " not deterministic: " << run_difference(grads[0][i], grads[1][i], *layouts[i], *refs[i]);
    }
  }
}

class KernelTest : public ::testing::TestWithParam<Config> {};

void run_case(const Config& c, const std::vector<int32_t>& lengths, std::mt19937_64& rng) {
  if (c.dtype == DType::kBF16)
    run_case<__nv_bfloat16>(c, lengths, rng);
  else
    run_case<__half>(c, lengths, rng);
}

TEST_P(KernelTest, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937_64 rng = testing::test_rng();
  run_case(GetParam(), test_lengths(rng), rng);
}

// The block sizes built (for `head_dim` only, where given).
std::vector<int> built_block_sizes(int head_dim) {
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  std::vector<int> sizes;
  for (size_t i = 0; i < n; ++i)
    if ((head_dim == 0 || rows[i].head_dim == head_dim) &&
        std::find(sizes.begin(), sizes.end(), rows[i].block_size) == sizes.end())
      sizes.push_back(rows[i].block_size);
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

// The block size of the main case lists: the default where the build has
// it, else the smallest built. A build restricted to other block sizes
// (BLOCKATTN_BLOCK_SIZES=128) then still runs every suite, instead of none
// (and the fuzzer draws from a non-empty list).
int primary_block_size() {
  const std::vector<int> sizes = built_block_sizes();
  const bool has_default = std::find(sizes.begin(), sizes.end(), kDefaultBlockSize) != sizes.end();
  return sizes.empty() || has_default ? kDefaultBlockSize : sizes.front();
}

// The head dims of the kernel table at the primary block size: the tests
// cover what the build has, not a list of their own.
std::vector<int> built_head_dims() {
  size_t n = 0;
  const KernelConfig* rows = supported_configs(&n);
  const int block_size = primary_block_size();
  std::vector<int> dims;
  for (size_t i = 0; i < n; ++i)
    if (rows[i].block_size == block_size && std::find(dims.begin(), dims.end(), rows[i].head_dim) == dims.end())
      dims.push_back(rows[i].head_dim);
  std::sort(dims.begin(), dims.end());
  return dims;
}

std::vector<Config> all_configs() {
  const int primary = primary_block_size();
  std::vector<Config> configs;
  const int heads[][2] = {{1, 1}, {4, 4}, {8, 2}, {4, 1}};
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (int d : built_head_dims())
      for (const auto& h : heads)
        configs.push_back({dt, d, h[0], h[1], LayoutKind::kPacked, OffsetsKind::kValid});
  for (int d : built_head_dims()) {
    configs.push_back({DType::kBF16, d, 4, 2, LayoutKind::kPadded, OffsetsKind::kValid});
    configs.push_back({DType::kBF16, d, 2, 1, LayoutKind::kPadded, OffsetsKind::kUnownedEdges});
    configs.push_back({DType::kFP16, d, 2, 2, LayoutKind::kPacked, OffsetsKind::kUnownedEdges});
    configs.push_back({DType::kBF16, d, 4, 1, LayoutKind::kHeadMajor, OffsetsKind::kValid, 0.3f});
  }
  // Rotary: both pair layouts, full and partial rotary dims, both position
  // modes with and without sequence starts, q/k and q/k/v, GQA, strided and
  // 16-bit tables, partial blocks (every case), both paths.
  using P = RotaryPairs;
  using Pos = RotaryPositions;
  for (int d : built_head_dims()) {
    configs.push_back({DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid, 0.f, {d, P::kHalfSplit}});
    configs.push_back(
        {DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid, 0.f, {d, P::kInterleaved, Pos::kTokenRow}});
    configs.push_back({DType::kFP16,
                       d,
                       8,
                       2,
                       LayoutKind::kPadded,
                       OffsetsKind::kValid,
                       0.f,
                       {d / 2, P::kHalfSplit, Pos::kInSequence, true, true}});
    configs.push_back({DType::kBF16,
                       d,
                       2,
                       2,
                       LayoutKind::kHeadMajor,
                       OffsetsKind::kUnownedEdges,
                       0.f,
                       {d / 2 + 2, P::kInterleaved, Pos::kInSequence, true, true, true, false}});
    configs.push_back({DType::kBF16,
                       d,
                       3,
                       3,
                       LayoutKind::kPacked,
                       OffsetsKind::kValid,
                       0.f,
                       {d, P::kInterleaved, Pos::kTokenRow, true, false, true, true}});  // the reference's convention
    configs.push_back({DType::kFP16,
                       d,
                       4,
                       1,
                       LayoutKind::kPacked,
                       OffsetsKind::kMalformed,
                       0.f,
                       {d - 16, P::kHalfSplit, Pos::kTokenRow, false, false, false, false}});
    // 16-bit tables whose rows TMA can copy (r/2 a multiple of 8), which the
    // sm_90 forward stages in shared memory at D = 128
    // (forward_stages_angles): sequence starts, some negative (the copy's
    // first row before the table), and [sin | cos | pad] strided views.
    configs.push_back({DType::kBF16,
                       d,
                       4,
                       4,
                       LayoutKind::kPadded,
                       OffsetsKind::kValid,
                       0.f,
                       {d, P::kHalfSplit, Pos::kInSequence, true, true, false, false}});
    configs.push_back({DType::kFP16,
                       d,
                       2,
                       1,
                       LayoutKind::kHeadMajor,
                       OffsetsKind::kUnownedEdges,
                       0.f,
                       {d, P::kInterleaved, Pos::kTokenRow, false, false, true, false}});
    // r/2 odd with 16-byte rows: the tables take the vector-load path, whose
    // last interleaved unit holds pairs past r/2.
    configs.push_back({DType::kBF16,
                       d,
                       2,
                       2,
                       LayoutKind::kPacked,
                       OffsetsKind::kValid,
                       0.f,
                       {d / 2 + 2, P::kInterleaved, Pos::kInSequence, true, true, false, true, true}});
  }
  for (Config& c : configs)
    c.block_size = primary;
  // Other block sizes the table has (on the paths that have them): plain,
  // GQA with padded rows and unowned edges, and rotary; and with one KV head
  // per query head (what the sm90 backward takes) fp16 with padded rows and
  // unowned edges, head-major with a custom scale, malformed offsets,
  // rotary of q, k and v, and a 16-bit table the sm_90 forward stages at
  // 128-token blocks (forward_stages_angles), with sequence starts.
  for (int d : built_head_dims())
    for (int b : built_block_sizes(d)) {
      if (b == primary) continue;
      Config plain{DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid};
      Config gqa{DType::kFP16, d, 8, 2, LayoutKind::kPadded, OffsetsKind::kUnownedEdges};
      Config rope{DType::kBF16, d, 4, 2, LayoutKind::kPacked, OffsetsKind::kValid, 0.f, {d, P::kHalfSplit}};
      Config padded{DType::kFP16, d, 3, 3, LayoutKind::kPadded, OffsetsKind::kUnownedEdges};
      Config scaled{DType::kBF16, d, 2, 2, LayoutKind::kHeadMajor, OffsetsKind::kValid, 0.3f};
      Config malformed{DType::kFP16, d, 2, 2, LayoutKind::kPacked, OffsetsKind::kMalformed};
      Config rope_qkv{DType::kFP16,
                      d,
                      3,
                      3,
                      LayoutKind::kPadded,
                      OffsetsKind::kUnownedEdges,
                      0.f,
                      {d / 2 + 2, P::kInterleaved, Pos::kInSequence, true, true, true, false}};
      Config rope_staged{DType::kBF16,
                         d,
                         4,
                         4,
                         LayoutKind::kPadded,
                         OffsetsKind::kValid,
                         0.f,
                         {d, P::kHalfSplit, Pos::kInSequence, true, true, false, false}};
      for (Config c : {plain, gqa, rope, padded, scaled, malformed, rope_qkv, rope_staged}) {
        c.block_size = b;
        configs.push_back(c);
      }
    }
  return configs;
}
INSTANTIATE_TEST_SUITE_P(All, KernelTest, ::testing::ValuesIn(all_configs()), config_name);

// Batches of sequences shorter than a block, which the schedule packs
// several to a tile (each row masked to its own sequence): plain, GQA with
// padded rows and unowned edges, malformed offsets, and rotary with
// in-sequence positions and per-sequence starts (each row's position counts
// from its own sequence), at every built block size and head dim. At
// 128-token blocks the schedule splits off the blocks of at most 64 rows
// for the 64-token kernels, which pack them (a second launch, on the split
// schedule's short tables: schedule/block_schedule.h, "Short blocks").
class PackedShortSequences : public ::testing::TestWithParam<Config> {};

TEST_P(PackedShortSequences, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937_64 rng = testing::test_rng();
  const int block_size = GetParam().block_size;
  std::uniform_int_distribution<int32_t> len(0, block_size - 1);
  std::vector<int32_t> lengths;
  for (int i = 0; i < 300; ++i)
    lengths.push_back(i % 97 == 50 ? 2 * block_size + 5 : len(rng));  // a few long ones break the runs
  run_case(GetParam(), lengths, rng);
}

std::vector<Config> packed_configs() {
  using P = RotaryPairs;
  using Pos = RotaryPositions;
  std::vector<Config> configs;
  for (int d : built_head_dims())
    for (int b : built_block_sizes(d)) {
      Config plain{DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid};
      Config gqa{DType::kFP16, d, 8, 2, LayoutKind::kPadded, OffsetsKind::kUnownedEdges};
      Config malformed{DType::kBF16, d, 2, 1, LayoutKind::kPacked, OffsetsKind::kMalformed};
      Config rope{DType::kBF16,
                  d,
                  4,
                  2,
                  LayoutKind::kPacked,
                  OffsetsKind::kValid,
                  0.f,
                  {d, P::kHalfSplit, Pos::kInSequence, true, true}};
      Config rope_rows{DType::kFP16,
                       d,
                       2,
                       2,
                       LayoutKind::kHeadMajor,
                       OffsetsKind::kValid,
                       0.f,
                       {d, P::kInterleaved, Pos::kTokenRow}};
      // The D = 64 forward's head pairs (sm90 forward_heads_per_slot): an odd
      // head count (a last slot of one head), groups of three (a pair that
      // straddles two KV heads: K and V in pair boxes over head-major rows),
      // and a single head.
      Config odd{DType::kBF16, d, 3, 3, LayoutKind::kPacked, OffsetsKind::kValid};
      Config straddle{DType::kFP16, d, 6, 2, LayoutKind::kHeadMajor, OffsetsKind::kValid};
      Config single{DType::kBF16, d, 1, 1, LayoutKind::kPadded, OffsetsKind::kValid};
      for (Config c : {plain, gqa, malformed, rope, rope_rows, odd, straddle, single}) {
        c.block_size = b;
        configs.push_back(c);
      }
    }
  return configs;
}
INSTANTIATE_TEST_SUITE_P(All, PackedShortSequences, ::testing::ValuesIn(packed_configs()), config_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PackedShortSequences);

// Long walks: the persistent grid capped at a few CTAs, so that every CTA
// walks dozens of tiles, as at headline sizes on a full GPU (a KernelTest
// problem gives most CTAs one tile there), with the state the kernels carry
// from tile to tile: schedule entries and Q/dO loaded a tile ahead, ring
// stages and their phases, shared-memory pairs that alternate. MHA, GQA and
// MQA at every built head dim and block size; the lengths include empty and
// packed short sequences.
class LongWalks : public ::testing::TestWithParam<Config> {};

// At most `ctas` persistent CTAs while in scope, restored however the case ends.
struct GridCap {
  explicit GridCap(int ctas) { core::set_persistent_grid_cap_for_testing(ctas); }
  ~GridCap() { core::set_persistent_grid_cap_for_testing(0); }
};

TEST_P(LongWalks, MatchesReference) {
  REQUIRE_GPU();
  GridCap cap(3);
  std::mt19937_64 rng = testing::test_rng();
  run_case(GetParam(), test_lengths(rng), rng);
}

std::vector<Config> long_walk_configs() {
  std::vector<Config> configs;
  for (int d : built_head_dims())
    for (int b : built_block_sizes(d)) {
      Config mha{DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid};
      Config gqa{DType::kFP16, d, 8, 2, LayoutKind::kPadded, OffsetsKind::kUnownedEdges};
      Config mqa{DType::kBF16, d, 3, 1, LayoutKind::kHeadMajor, OffsetsKind::kValid};
      // 32 tensors (each head's dO and Q) per (block, KV head) unit in the
      // sm_90 grouped backward's stream, against 8 ring slots at D = 128 and
      // 16 at D = 64.
      Config wide_group{DType::kBF16, d, 16, 1, LayoutKind::kPacked, OffsetsKind::kValid};
      for (Config c : {mha, gqa, mqa, wide_group}) {
        c.block_size = b;
        configs.push_back(c);
      }
    }
  return configs;
}
INSTANTIATE_TEST_SUITE_P(All, LongWalks, ::testing::ValuesIn(long_walk_configs()), config_name);

// Scores whose row max lies far above the row's first key at some rows
// (push_first_keys_far_below), where the sm_90 grouped backward's softmax
// for grouped heads, shifted by the first key's score, overflows and is
// redone with the row max, a warpgroup at a time (tile::RowShift): MQA and
// GQA, on a few blocks a sequence and on many, at every built head dim; and
// MHA, whose kernels take the row max, on the same inputs.
class FarFirstKeys : public ::testing::TestWithParam<Config> {};

TEST_P(FarFirstKeys, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937_64 rng = testing::test_rng();
  const int b = GetParam().block_size;
  {
    SCOPED_TRACE("a few blocks a sequence");
    std::vector<int32_t> lengths;
    for (int i = 0; i < 24; ++i)
      lengths.push_back(std::uniform_int_distribution<int32_t>(b + 1, 3 * b)(rng));
    run_case(GetParam(), lengths, rng);
  }
  {
    SCOPED_TRACE("many blocks a sequence");
    std::vector<int32_t> lengths;
    for (int i = 0; i < 5; ++i)
      lengths.push_back(std::uniform_int_distribution<int32_t>(10 * b, 16 * b)(rng));
    run_case(GetParam(), lengths, rng);
  }
}

std::vector<Config> far_first_key_configs() {
  std::vector<Config> configs;
  for (int d : built_head_dims()) {
    Config mha{DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid};
    Config mqa{DType::kBF16, d, 8, 1, LayoutKind::kPacked, OffsetsKind::kValid};
    Config gqa{DType::kFP16, d, 4, 2, LayoutKind::kPadded, OffsetsKind::kValid};
    for (Config c : {mha, mqa, gqa}) {
      c.block_size = primary_block_size();
      c.far_first_keys = true;
      configs.push_back(c);
    }
  }
  return configs;
}
INSTANTIATE_TEST_SUITE_P(All, FarFirstKeys, ::testing::ValuesIn(far_first_key_configs()), config_name);

// Malformed offsets: results follow the documented sanitized semantics and no
// element outside the sanitized blocks is written. tools/gpu_check.sh also runs
// this suite under compute-sanitizer memcheck (exact-size allocations).
class MalformedOffsets : public ::testing::TestWithParam<Config> {};

TEST_P(MalformedOffsets, StayInBounds) {
  REQUIRE_GPU();
  std::mt19937_64 rng = testing::test_rng();
  run_case(GetParam(), test_lengths(rng), rng);
}
std::vector<Config> malformed_configs() {
  std::vector<Config> configs = {Config{DType::kBF16, 64, 2, 1, LayoutKind::kPacked, OffsetsKind::kMalformed},
                                 Config{DType::kFP16, 128, 4, 4, LayoutKind::kPadded, OffsetsKind::kMalformed}};
  for (Config& c : configs)
    c.block_size = primary_block_size();
  return configs;
}
INSTANTIATE_TEST_SUITE_P(All, MalformedOffsets, ::testing::ValuesIn(malformed_configs()), config_name);

// Each kind of batch (core/batch_kind.h) on the kernel it picks in a row:
// sequences shorter than a block on average (ShortSequences variants), of a
// few blocks (FewBlocks: the sm_90 backward at D = 64 and 128 runs them on
// the grouped kernel with a group of one), of many (ManyBlocks: at D = 64
// the same kernel on walks of its own), and between (the row's kernel). The
// lengths are drawn around each kind's mean, the block edges included.
class BatchKinds : public ::testing::TestWithParam<Config> {};

// The device's memory read as an H200's (4.8 TB/s) while in scope, restored
// however the case ends.
struct FastMemory {
  FastMemory() { core::set_memory_peak_for_testing(4800); }
  ~FastMemory() { core::set_memory_peak_for_testing(0); }
};

TEST_P(BatchKinds, MatchReference) {
  REQUIRE_GPU();
  std::mt19937_64 rng = testing::test_rng();
  const int b = GetParam().block_size;
  auto draw = [&](int count, int lo, int hi, std::vector<int32_t> edges) {
    std::uniform_int_distribution<int32_t> len(lo, hi);
    for (int i = 0; i < count; ++i)
      edges.push_back(len(rng));
    std::shuffle(edges.begin(), edges.end(), rng);
    return edges;
  };
  {
    SCOPED_TRACE("short: about half a block a sequence");
    run_case(GetParam(), draw(40, 0, b - 1, {0, 1, b - 1, b}), rng);
  }
  {
    SCOPED_TRACE("a few blocks: about 1.7 a sequence");
    run_case(GetParam(), draw(24, b + 1, 2 * b + b / 2, {b, b + 1, 2 * b - 1, 2 * b}), rng);
  }
  {
    SCOPED_TRACE("long: about 6 blocks a sequence");
    run_case(GetParam(), draw(6, 4 * b, 12 * b, {1, b + 1, 8 * b}), rng);
  }
  // 9.2 blocks a sequence at the least (5 x 10 + 1 + 32 blocks over 9), past
  // core::many_blocks_min_x2's 8.
  auto many = [&] { return draw(5, 10 * b, 16 * b, {1, b - 1, 16 * b, 16 * b + 1}); };
  {
    SCOPED_TRACE("many blocks: about 11 a sequence");
    run_case(GetParam(), many(), rng);
  }
  {
    SCOPED_TRACE("many blocks on three CTAs: walks of about a hundred units each");
    GridCap cap(3);
    run_case(GetParam(), many(), rng);
  }
  {
    SCOPED_TRACE("many blocks, malformed offsets");
    Config malformed = GetParam();
    malformed.offsets = OffsetsKind::kMalformed;
    run_case(malformed, many(), rng);
  }
  {
    // What an H200 runs (core::kFastMemoryGBps): batches of a few blocks as
    // long ones, short ones with the sm_90 backward's stepped stores.
    SCOPED_TRACE("as on fast memory: short, then a few blocks");
    FastMemory fast;
    run_case(GetParam(), draw(40, 0, b - 1, {0, 1, b - 1, b}), rng);
    run_case(GetParam(), draw(24, b + 1, 2 * b + b / 2, {b, b + 1, 2 * b - 1, 2 * b}), rng);
  }
}
std::vector<Config> batch_kind_configs() {
  std::vector<Config> configs;
  for (int d : built_head_dims()) {
    Config mha{DType::kBF16, d, 4, 4, LayoutKind::kPacked, OffsetsKind::kValid};
    mha.block_size = primary_block_size();
    configs.push_back(mha);
    // The other dtype, an odd head count (a CTA's walk of alternate units
    // then mixes heads and blocks unevenly), padded rows and unowned edges.
    Config odd{DType::kFP16, d, 3, 3, LayoutKind::kPadded, OffsetsKind::kUnownedEdges};
    odd.block_size = primary_block_size();
    configs.push_back(odd);
  }
  return configs;
}
INSTANTIATE_TEST_SUITE_P(All, BatchKinds, ::testing::ValuesIn(batch_kind_configs()), config_name);

// Differential fuzzing: random shapes (head dims from the kernel table, GQA
// ratios), layouts, scales, offsets kinds and lengths (the block edges, short,
// long), both paths, against the fp64 reference. Four shards, so ctest can run
// them side by side; BLOCKATTN_FUZZ_CASES (or test_gpu --cases N) sets the
// total, default 200. Each case prints its configuration and lengths.
int fuzz_cases() {
  const char* env = std::getenv("BLOCKATTN_FUZZ_CASES");
  return env != nullptr && *env != '\0' ? std::max(1, std::atoi(env)) : 200;
}

std::vector<int32_t> fuzz_lengths(std::mt19937_64& rng) {
  static const int32_t kEdges[] = {0, 1, 63, 64, 65, 127, 128};
  std::vector<int32_t> lengths(std::uniform_int_distribution<int>(0, 10)(rng));
  for (auto& len : lengths) {
    const int kind = std::uniform_int_distribution<int>(0, 19)(rng);
    if (kind < 8)
      len = kEdges[std::uniform_int_distribution<int>(0, 6)(rng)];
    else if (kind < 19)
      len = std::uniform_int_distribution<int32_t>(1, 200)(rng);
    else
      len = std::uniform_int_distribution<int32_t>(500, 1100)(rng);
  }
  return lengths;
}

Config fuzz_config(std::mt19937_64& rng) {
  const std::vector<int> dims = built_head_dims();
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Config c{};
  c.dtype = pick(2) ? DType::kBF16 : DType::kFP16;
  c.head_dim = dims[pick(static_cast<int>(dims.size()))];
  const std::vector<int> sizes = built_block_sizes(c.head_dim);
  c.block_size = sizes[pick(static_cast<int>(sizes.size()))];
  c.hkv = 1 + pick(3);
  c.hq = c.hkv * (1 << pick(3));  // group 1, 2 or 4
  c.layout = static_cast<LayoutKind>(pick(3));
  const int offsets_kind = pick(10);
  c.offsets = offsets_kind < 8    ? OffsetsKind::kValid
              : offsets_kind == 8 ? OffsetsKind::kUnownedEdges
                                  : OffsetsKind::kMalformed;
  c.scale = pick(2) ? 0.f : std::uniform_real_distribution<float>(0.02f, 0.5f)(rng);
  if (pick(3) == 0) {  // rotary in a third of the cases
    RotaryCase& r = c.rotary;
    r.pairs = pick(2) ? RotaryPairs::kHalfSplit : RotaryPairs::kInterleaved;
    r.dim = r.pairs == RotaryPairs::kHalfSplit ? 16 * (1 + pick(c.head_dim / 16)) : 2 * (1 + pick(c.head_dim / 2));
    r.positions = pick(2) ? RotaryPositions::kInSequence : RotaryPositions::kTokenRow;
    r.rotate_v = pick(2);
    r.seq_starts = r.positions == RotaryPositions::kInSequence && pick(2);
    r.strided = pick(2);
    r.table_fp32 = pick(2);
  }
  return c;
}

constexpr int kFuzzShards = 4;
class Fuzz : public ::testing::TestWithParam<int> {};

TEST_P(Fuzz, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937_64 rng = testing::test_rng();
  const int total = fuzz_cases();
  const int begin = total * GetParam() / kFuzzShards, end = total * (GetParam() + 1) / kFuzzShards;
  for (int i = begin; i < end; ++i) {
    const Config c = fuzz_config(rng);
    const std::vector<int32_t> lengths = fuzz_lengths(rng);
    std::string lens;
    for (int32_t len : lengths)
      lens += std::to_string(len) + " ";
    std::printf("  case %d: %s, lengths [ %s]\n", i, config_string(c).c_str(), lens.c_str());
    SCOPED_TRACE("fuzz case " + std::to_string(i) + ": " + config_string(c) + ", lengths [ " + lens + "]");
    run_case(c, lengths, rng);
    if (HasFailure()) break;  // the first failing case is the one to replay
  }
}
INSTANTIATE_TEST_SUITE_P(Shards, Fuzz, ::testing::Range(0, kFuzzShards));

// Forward and backward enqueue no host synchronization and read offsets only on
// the device: both can be captured in one CUDA graph, and replays pick up new
// input values and new offsets.
TEST(CudaGraph, CapturesForwardAndBackward) {
  REQUIRE_GPU();
  REQUIRE_HEAD_DIM(128);
  REQUIRE_BLOCK_SIZE(kDefaultBlockSize);  // its shapes take the default
  std::mt19937_64 rng = testing::test_rng();
  const int64_t tokens = 700, num_seqs = 4;
  const Layout l = make_layout(tokens, 4, 128, LayoutKind::kPacked);
  DeviceBuffer<__nv_bfloat16> q(l.elems()), k(l.elems()), v(l.elems()), dout(l.elems());
  DeviceBuffer<__nv_bfloat16> out(l.elems()), dq(l.elems()), dk(l.elems()), dv(l.elems());
  DeviceBuffer<int32_t> offsets(num_seqs + 1);
  DeviceBuffer<unsigned char> ws(workspace_size(num_seqs, tokens));
  const Shape shape{num_seqs, tokens, 4, 4, 128, DType::kBF16};
  const ForwardArgs fa = forward_args(shape, offsets.get(), l, l, q.get(), k.get(), v.get(), out.get());
  const BackwardArgs ba = backward_args(fa, l, l, dout.get(), dq.get(), dk.get(), dv.get());

  auto fill = [&](const std::vector<int32_t>& lengths) {
    for (auto* t : {&q, &k, &v, &dout})
      t->upload(HostTensor<__nv_bfloat16>(l, rng).stored);
    offsets.upload(offsets_from_lengths(lengths));
  };
  auto results = [&] {
    return std::vector<std::vector<__nv_bfloat16>>{out.download(), dq.download(), dk.download(), dv.download()};
  };

  cudaStream_t stream;
  BA_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fill({100, 200, 300, 100});
  // Warm-up outside capture (first calls configure the kernels), then capture.
  ASSERT_TRUE(forward(fa, ws.get(), ws.bytes(), stream).ok());
  ASSERT_TRUE(backward(ba, ws.get(), ws.bytes(), stream).ok());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BA_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status fs = forward(fa, ws.get(), ws.bytes(), stream);
  const Status bs = backward(ba, ws.get(), ws.bytes(), stream);
  BA_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(fs.ok()) << fs.message;
  ASSERT_TRUE(bs.ok()) << bs.message;
  BA_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  for (const auto& lengths : {std::vector<int32_t>{64, 1, 500, 135}, std::vector<int32_t>{0, 700, 0, 0}}) {
    fill(lengths);
    for (auto* t : {&out, &dq, &dk, &dv})
      t->poison();
    // poison() is a cudaMemset on the legacy stream, which a non-blocking
    // stream does not wait for: without this the memset could land after
    // the kernels wrote their outputs.
    BA_CHECK_CUDA(cudaDeviceSynchronize());
    BA_CHECK_CUDA(cudaGraphLaunch(exec, stream));
    BA_CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto replayed = results();
    for (auto* t : {&out, &dq, &dk, &dv})
      t->poison();
    BA_CHECK_CUDA(cudaDeviceSynchronize());  // as above
    ASSERT_TRUE(forward(fa, ws.get(), ws.bytes(), stream).ok());
    ASSERT_TRUE(backward(ba, ws.get(), ws.bytes(), stream).ok());
    BA_CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto eager = results();
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(0, std::memcmp(replayed[i].data(), eager[i].data(), eager[i].size() * 2)) << "tensor " << i;
  }
  BA_CHECK_CUDA(cudaGraphExecDestroy(exec));
  BA_CHECK_CUDA(cudaGraphDestroy(graph));
  BA_CHECK_CUDA(cudaStreamDestroy(stream));
}

// Options::reuse_schedule: a backward reusing the forward's schedule gives the
// bits of one that rebuilds it; a schedule built for other sizes is ignored on
// the device (outputs untouched; gpu_check.sh runs this under memcheck). At
// every built block size: at 128 tokens the schedule is split, and the
// backward's two launches reuse both its tables.
TEST(ReuseSchedule, BackwardReusesTheForwardsAndIgnoresAStaleOne) {
  REQUIRE_GPU();
  REQUIRE_HEAD_DIM(128);
  std::mt19937_64 rng = testing::test_rng();
  const std::vector<int32_t> lengths = {64, 1, 500, 135, 0, 300};
  const auto offsets_host = offsets_from_lengths(lengths);
  const int64_t tokens = offsets_host.back(), num_seqs = static_cast<int64_t>(lengths.size());
  const Layout l = make_layout(tokens, 4, 128, LayoutKind::kPacked);
  DeviceBuffer<__nv_bfloat16> q(l.elems()), k(l.elems()), v(l.elems()), dout(l.elems()), out(l.elems());
  for (auto* t : {&q, &k, &v, &dout})
    t->upload(HostTensor<__nv_bfloat16>(l, rng).stored);
  DeviceBuffer<int32_t> offsets(offsets_host.size());
  offsets.upload(offsets_host);
  DeviceBuffer<unsigned char> ws(workspace_size(num_seqs, tokens));
  for (const int block_size : built_block_sizes(128)) {
    SCOPED_TRACE("block_size " + std::to_string(block_size));
    Shape shape{num_seqs, tokens, 4, 4, 128, DType::kBF16};
    shape.block_size = block_size;
    for (Backend backend : device_backends(Operation::kBackward, DType::kBF16, 128, block_size, false)) {
      ForwardArgs fa = forward_args(shape, offsets.get(), l, l, q.get(), k.get(), v.get(), out.get());
      fa.options.backend = backend;
      auto backward_grads = [&](bool reuse, const BackwardArgs& base) {
        DeviceBuffer<__nv_bfloat16> dq(l.elems()), dk(l.elems()), dv(l.elems());
        for (auto* t : {&dq, &dk, &dv})
          t->poison();
        BackwardArgs ba = backward_args(fa, l, l, dout.get(), dq.get(), dk.get(), dv.get());
        ba.shape = base.shape;
        ba.offsets = base.offsets;
        ba.options.reuse_schedule = reuse;
        EXPECT_TRUE(backward(ba, ws.get(), ws.bytes(), nullptr).ok());
        BA_CHECK_CUDA(cudaDeviceSynchronize());
        return std::vector<std::vector<__nv_bfloat16>>{dq.download(), dk.download(), dv.download()};
      };
      const BackwardArgs same = backward_args(fa, l, l, nullptr, nullptr, nullptr, nullptr);
      ASSERT_TRUE(forward(fa, ws.get(), ws.bytes(), nullptr).ok());
      const auto reused = backward_grads(true, same);
      const auto rebuilt = backward_grads(false, same);
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(0, std::memcmp(reused[i].data(), rebuilt[i].data(), rebuilt[i].size() * 2))
            << backend_name(backend) << " gradient " << i;

      // The workspace now holds the schedule of all tokens; a backward over the
      // first 200 tokens only must not use it.
      ASSERT_TRUE(forward(fa, ws.get(), ws.bytes(), nullptr).ok());
      BackwardArgs fewer = same;
      fewer.shape.total_tokens = 200;
      fewer.shape.num_seqs = 2;
      const auto ignored = backward_grads(true, fewer);
      for (int i = 0; i < 3; ++i)
        for (const auto& x : ignored[i]) {
          uint16_t bits;
          std::memcpy(&bits, &x, 2);
          ASSERT_EQ(bits, 0xFFFF) << backend_name(backend) << ": a stale schedule was used";
        }
    }
  }
}

// The schedule's kernels and the sm90 attention kernels may start while the
// kernel before them on the stream still runs (programmatic dependent
// launch: schedule/programmatic_launch.cuh), so each must wait for it before
// touching memory. Here a kernel that writes the call's inputs only after
// spinning for 200 us stands before the forward (whose schedule kernel
// follows it directly), and another that writes dout before the backward
// (which reuses the forward's schedule, so its attention kernel follows the
// late kernel directly). Until they run, the inputs hold other values and the offsets
// describe empty sequences, whose outputs would stay poisoned; the outputs
// must be the bits of the same calls on inputs written beforehand. D = 128
// takes the sm90 forward; D = 256 kAuto's sm80 one.
class ProgrammaticLaunch : public ::testing::TestWithParam<int> {};

TEST_P(ProgrammaticLaunch, KernelsWaitForTheKernelBeforeThem) {
  REQUIRE_GPU();
  const int head_dim = GetParam();
  REQUIRE_HEAD_DIM(head_dim);
  if (device_compute_capability() >= 90)
    EXPECT_TRUE(schedule::schedule_overlaps_its_neighbours())
        << "the schedule's sm_90a code was not picked: its kernels and the attention kernel start only when the "
           "kernel before completes";
  std::mt19937_64 rng = testing::test_rng();
  const std::vector<int32_t> lengths = {64, 1, 500, 135, 0, 300};
  const auto offsets_host = offsets_from_lengths(lengths);
  const int64_t tokens = offsets_host.back(), num_seqs = static_cast<int64_t>(lengths.size());
  const Layout l = make_layout(tokens, 4, head_dim, LayoutKind::kPacked);
  using Tensor = DeviceBuffer<__nv_bfloat16>;
  Tensor q(l.elems()), k(l.elems()), v(l.elems()), dout(l.elems());
  Tensor q_late(l.elems()), k_late(l.elems()), v_late(l.elems()), dout_late(l.elems());
  Tensor out(l.elems()), dq(l.elems()), dk(l.elems()), dv(l.elems());
  DeviceBuffer<int32_t> offsets(offsets_host.size()), offsets_late(offsets_host.size());
  offsets_late.upload(offsets_host);
  for (auto* t : {&q_late, &k_late, &v_late, &dout_late})
    t->upload(HostTensor<__nv_bfloat16>(l, rng).stored);
  DeviceBuffer<unsigned char> ws(workspace_size(num_seqs, tokens));
  const Shape shape{num_seqs, tokens, 4, 4, head_dim, DType::kBF16};
  constexpr int kDelayUs = 200;
  auto copy_of = [](const auto& from, auto& to) { return LateCopy{from.get(), to.get(), to.bytes()}; };
  // Where a backend has no forward at this head dim (the sm90 one at D = 256
  // is built only as a manual row), the forward is kAuto's.
  const auto forward_backends = device_backends(Operation::kForward, DType::kBF16, head_dim, kDefaultBlockSize, false);
  auto has_forward = [&](Backend b) {
    return std::find(forward_backends.begin(), forward_backends.end(), b) != forward_backends.end();
  };

  for (Backend backend : device_backends(Operation::kBackward, DType::kBF16, head_dim, kDefaultBlockSize, false)) {
    SCOPED_TRACE(backend_name(backend));
    ForwardArgs fa = forward_args(shape, offsets.get(), l, l, q.get(), k.get(), v.get(), out.get());
    fa.options.backend = has_forward(backend) ? backend : Backend::kAuto;
    BackwardArgs ba = backward_args(fa, l, l, dout.get(), dq.get(), dk.get(), dv.get());
    ba.options.reuse_schedule = true;
    auto run = [&](bool late) {
      for (auto* t : {&out, &dq, &dk, &dv})
        t->poison();
      ws.poison();
      if (late) {  // other values until the late kernels write the real ones
        for (auto* t : {&q, &k, &v, &dout})
          t->upload(HostTensor<__nv_bfloat16>(l, rng).stored);
        offsets.upload(std::vector<int32_t>(offsets_host.size(), 0));
        BA_CHECK_CUDA(enqueue_late_copies(
            {copy_of(q_late, q), copy_of(k_late, k), copy_of(v_late, v), copy_of(offsets_late, offsets)}, kDelayUs,
            nullptr));
      } else {
        for (auto [from, to] : {std::pair{&q_late, &q}, {&k_late, &k}, {&v_late, &v}, {&dout_late, &dout}})
          BA_CHECK_CUDA(cudaMemcpy(to->get(), from->get(), to->bytes(), cudaMemcpyDeviceToDevice));
        offsets.upload(offsets_host);
      }
      EXPECT_TRUE(forward(fa, ws.get(), ws.bytes(), nullptr).ok());
      if (late) BA_CHECK_CUDA(enqueue_late_copies({copy_of(dout_late, dout)}, kDelayUs, nullptr));
      EXPECT_TRUE(backward(ba, ws.get(), ws.bytes(), nullptr).ok());
      BA_CHECK_CUDA(cudaDeviceSynchronize());
      return std::vector<std::vector<__nv_bfloat16>>{out.download(), dq.download(), dk.download(), dv.download()};
    };
    const auto in_place = run(false), late = run(true);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(0, std::memcmp(late[i].data(), in_place[i].data(), in_place[i].size() * 2)) << "tensor " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, ProgrammaticLaunch, ::testing::Values(128, 256),
                         [](const ::testing::TestParamInfo<int>& info) { return "d" + std::to_string(info.param); });

// Both forwards claim their tiles from counters in the workspace header that
// the last CTA of each launch zeroes (schedule/tile_claims.cuh; the sm90 one
// a ring's worth at a time, schedule/cta_walk.h). Every launch over one
// workspace must cover every tile once: a big batch (far more tiles than the
// CTAs take statically), then one with fewer tiles than CTAs (CTAs without a
// tile count themselves out too), then the big one twice. Each launch's
// output is poisoned first; a tile skipped leaves poison (NaN bits), and the
// big launches must give the first one's bits.
void check_claimed_tiles(Backend backend) {
  std::mt19937_64 rng = testing::test_rng();
  std::vector<int32_t> lengths(300);
  std::uniform_int_distribution<int32_t> length(1, 500);
  for (auto& n : lengths)
    n = length(rng);
  const auto offsets_big = offsets_from_lengths(lengths);
  std::vector<int32_t> offsets_small(offsets_big.size(), 100);  // sizes the buffer; 3 entries used
  offsets_small[0] = 0;
  offsets_small[1] = 37;
  const int64_t tokens = offsets_big.back(), num_seqs = static_cast<int64_t>(lengths.size());
  const Layout l = make_layout(tokens, 4, 128, LayoutKind::kPacked);
  DeviceBuffer<__nv_bfloat16> q(l.elems()), k(l.elems()), v(l.elems()), out(l.elems());
  for (auto* t : {&q, &k, &v})
    t->upload(HostTensor<__nv_bfloat16>(l, rng).stored);
  DeviceBuffer<int32_t> offsets(offsets_big.size());
  DeviceBuffer<unsigned char> ws(workspace_size(num_seqs, tokens));

  auto launch = [&](const std::vector<int32_t>& offs, int64_t seqs) {
    offsets.upload(offs);
    const int64_t rows = offs[seqs];
    const Shape shape{seqs, rows, 4, 4, 128, DType::kBF16};
    ForwardArgs fa = forward_args(shape, offsets.get(), l, l, q.get(), k.get(), v.get(), out.get());
    fa.options.backend = backend;
    out.poison();
    EXPECT_TRUE(forward(fa, ws.get(), ws.bytes(), nullptr).ok());
    BA_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> result = out.download();
    result.resize(static_cast<size_t>(rows) * 4 * 128);  // the rows this launch owns
    for (size_t i = 0; i < result.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, &result[i], 2);
      if (bits == 0xFFFF) {
        ADD_FAILURE() << "row " << i / (4 * 128) << " of " << rows << " was not written";
        break;
      }
    }
    return result;
  };
  const auto first = launch(offsets_big, num_seqs);
  launch(offsets_small, 2);
  for (int again = 0; again < 2; ++again) {
    const auto now = launch(offsets_big, num_seqs);
    EXPECT_EQ(0, std::memcmp(now.data(), first.data(), first.size() * 2)) << "big launch " << again + 2;
  }
}

TEST(ClaimedTiles, EveryLaunchOverOneWorkspaceCoversEveryTile) {
  REQUIRE_GPU();
  REQUIRE_HEAD_DIM(128);
  const auto built = device_backends(Operation::kForward, DType::kBF16, 128, kDefaultBlockSize, false);
  int checked = 0;
  for (const Backend backend : {Backend::kPortable, Backend::kHopper}) {
    if (std::find(built.begin(), built.end(), backend) == built.end()) continue;  // not on this GPU or build
    SCOPED_TRACE(backend_name(backend));
    check_claimed_tiles(backend);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no forward at D = 128 in this build";
}

// The sm90 ring where consumers share stages (5 stages, 3 consumers: the
// backward at D <= 64): a consumer could wait on its stage one phase early,
// while another consumer's tile was still in it, and read (and release) the
// wrong data: "unspecified launch failure", a hang, or wrong gradients in
// about 2% of headline-size launches (docs/perf.md, "A race in the
// shared-stage ring"). The race needs long runs of tiles per CTA, so the
// problem is large (~1000 tiles per CTA; 1 GB per tensor, filled by copies of
// one random block); every launch must succeed and give the first launch's
// bits (compared on three 4 MB windows of each output: the whole tensors
// would take seconds per launch to download).
TEST(Pipeline, LongRunsGiveTheSameBitsEveryLaunch) {
  REQUIRE_GPU();
  if (device_compute_capability() != 90) GTEST_SKIP() << "the shared-stage ring is the sm90 frame's";
  std::mt19937_64 rng = testing::test_rng();
  const int64_t num_seqs = 512, tokens = num_seqs * 2048;
  const std::vector<int32_t> lengths(num_seqs, 2048);
  for (int d : {32, 64}) {
    const auto built = device_backends(Operation::kBackward, DType::kBF16, d, kDefaultBlockSize, false);
    if (std::find(built.begin(), built.end(), Backend::kHopper) == built.end()) continue;  // not in this build
    const int heads = 512 / d;
    const Layout l = make_layout(tokens, heads, d, LayoutKind::kPacked);
    DeviceBuffer<__nv_bfloat16> q(l.elems()), k(l.elems()), v(l.elems()), dout(l.elems()), out(l.elems());
    const std::vector<__nv_bfloat16> block =
        HostTensor<__nv_bfloat16>(make_layout(4096, heads, d, LayoutKind::kPacked), rng).stored;
    for (auto* t : {&q, &k, &v, &dout})
      for (size_t at = 0; at < l.elems(); at += block.size())
        BA_CHECK_CUDA(cudaMemcpy(t->get() + at, block.data(), std::min(block.size(), l.elems() - at) * 2,
                                 cudaMemcpyHostToDevice));
    DeviceBuffer<int32_t> offsets(num_seqs + 1);
    offsets.upload(offsets_from_lengths(lengths));
    DeviceBuffer<unsigned char> ws(workspace_size(num_seqs, tokens));
    const Shape shape{num_seqs, tokens, heads, heads, d, DType::kBF16};
    ForwardArgs fa = forward_args(shape, offsets.get(), l, l, q.get(), k.get(), v.get(), out.get());
    fa.options.backend = Backend::kHopper;
    DeviceBuffer<__nv_bfloat16> dq(l.elems()), dk(l.elems()), dv(l.elems());
    const BackwardArgs ba = backward_args(fa, l, l, dout.get(), dq.get(), dk.get(), dv.get());
    const size_t window = 2 << 20;  // elements
    auto windows = [&] {
      std::vector<__nv_bfloat16> host;
      for (auto* t : {&out, &dq, &dk, &dv})
        for (size_t at : {size_t{0}, (l.elems() - window) / 2, l.elems() - window}) {
          host.resize(host.size() + window);
          BA_CHECK_CUDA(
              cudaMemcpy(host.data() + host.size() - window, t->get() + at, window * 2, cudaMemcpyDeviceToHost));
        }
      return host;
    };
    std::vector<__nv_bfloat16> first;
    for (int launch = 0; launch < 40; ++launch) {
      for (auto* t : {&out, &dq, &dk, &dv})
        t->poison();
      ASSERT_TRUE(forward(fa, ws.get(), ws.bytes(), nullptr).ok());
      ASSERT_TRUE(backward(ba, ws.get(), ws.bytes(), nullptr).ok());
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize()) << "D = " << d << ", launch " << launch;
      const std::vector<__nv_bfloat16> now = windows();
      if (launch == 0) first = now;
      ASSERT_EQ(0, std::memcmp(now.data(), first.data(), first.size() * 2))
          << "D = " << d << ", launch " << launch << " differs from the first launch";
    }
  }
}

// The API runs on the current device: the same calls on every GPU give the
// same bits (same inputs, deterministic kernels), one after another and with
// all GPUs at once from one host thread each.
TEST(MultiGpu, EveryDeviceAndConcurrently) {
  REQUIRE_GPU();
  REQUIRE_HEAD_DIM(128);
  int devices = 0;
  BA_CHECK_CUDA(cudaGetDeviceCount(&devices));
  if (devices < 2) GTEST_SKIP() << "needs at least 2 CUDA devices; found " << devices;
  std::mt19937_64 rng = testing::test_rng();
  const std::vector<int32_t> lengths = {64, 1, 500, 135, 0, 300};
  const int64_t tokens = 1000, num_seqs = static_cast<int64_t>(lengths.size());
  const Layout ql = make_layout(tokens, 8, 128, LayoutKind::kPacked),
               kl = make_layout(tokens, 2, 128, LayoutKind::kPacked);
  const HostTensor<__nv_bfloat16> hq(ql, rng), hk(kl, rng), hv(kl, rng), hdout(ql, rng);
  auto offsets_host = offsets_from_lengths(lengths);
  offsets_host.back() = static_cast<int32_t>(tokens);  // the last sequence takes the rest

  // Everything one device needs, allocated and run on that device.
  struct OnDevice {
    std::vector<__nv_bfloat16> out, dq, dk, dv;
    Status forward_status, backward_status;
  };
  auto run_on = [&](int device, OnDevice* r) {
    BA_CHECK_CUDA(cudaSetDevice(device));
    DeviceBuffer<__nv_bfloat16> q(ql.elems()), k(kl.elems()), v(kl.elems()), dout(ql.elems());
    DeviceBuffer<__nv_bfloat16> out(ql.elems()), dq(ql.elems()), dk(kl.elems()), dv(kl.elems());
    DeviceBuffer<int32_t> offsets(offsets_host.size());
    DeviceBuffer<unsigned char> ws(workspace_size(num_seqs, tokens));
    q.upload(hq.stored);
    k.upload(hk.stored);
    v.upload(hv.stored);
    dout.upload(hdout.stored);
    offsets.upload(offsets_host);
    for (auto* t : {&out, &dq, &dk, &dv})
      t->poison();
    const Shape shape{num_seqs, tokens, 8, 2, 128, DType::kBF16};
    const ForwardArgs fa = forward_args(shape, offsets.get(), ql, kl, q.get(), k.get(), v.get(), out.get());
    const BackwardArgs ba = backward_args(fa, ql, kl, dout.get(), dq.get(), dk.get(), dv.get());
    r->forward_status = forward(fa, ws.get(), ws.bytes(), nullptr);
    r->backward_status = backward(ba, ws.get(), ws.bytes(), nullptr);
    BA_CHECK_CUDA(cudaDeviceSynchronize());
    r->out = out.download();
    r->dq = dq.download();
    r->dk = dk.download();
    r->dv = dv.download();
  };
  auto expect_same = [](const OnDevice& a, const OnDevice& b, const std::string& what) {
    ASSERT_TRUE(a.forward_status.ok()) << a.forward_status.message;
    ASSERT_TRUE(a.backward_status.ok()) << a.backward_status.message;
    EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2)) << what << ": out";
    EXPECT_EQ(0, std::memcmp(a.dq.data(), b.dq.data(), a.dq.size() * 2)) << what << ": dq";
    EXPECT_EQ(0, std::memcmp(a.dk.data(), b.dk.data(), a.dk.size() * 2)) << what << ": dk";
    EXPECT_EQ(0, std::memcmp(a.dv.data(), b.dv.data(), a.dv.size() * 2)) << what << ": dv";
  };

  std::vector<OnDevice> alone(devices), together(devices);
  for (int d = 0; d < devices; ++d)
    run_on(d, &alone[d]);
  std::vector<std::thread> threads;
  for (int d = 0; d < devices; ++d)
    threads.emplace_back(run_on, d, &together[d]);
  for (auto& t : threads)
    t.join();
  BA_CHECK_CUDA(cudaSetDevice(0));
  for (int d = 0; d < devices; ++d) {
    expect_same(alone[d], alone[0], "device " + std::to_string(d) + " vs device 0");
    expect_same(together[d], alone[d], "device " + std::to_string(d) + " concurrently vs alone");
  }
}

// kAuto takes the sm_90 path on compute capability 9.0 unless
// BLOCKATTN_FORCE_PORTABLE is set, and the portable path elsewhere.
TEST(Dispatch, AutoFollowsDeviceAndEnvironment) {
  REQUIRE_GPU();
  REQUIRE_HEAD_DIM(64);
  REQUIRE_HEAD_DIM(128);
  REQUIRE_BLOCK_SIZE(kDefaultBlockSize);  // its shapes take the default
  ForwardArgs a;
  a.shape = {3, 1000, 2, 2, 64, DType::kBF16};
  DeviceBuffer<__nv_bfloat16> t(1000 * 2 * 64);  // never launched on: forward_backend only decides
  DeviceBuffer<int32_t> offsets(4);
  a.offsets = offsets.get();
  a.q = a.k = a.v = {t.get(), 128, 64};
  DeviceBuffer<__nv_bfloat16> out(1000 * 2 * 64);
  a.out = {out.get(), 128, 64};
  const Backend expected = device_compute_capability() == 90 ? Backend::kHopper : Backend::kPortable;
  Backend chosen;
  ASSERT_TRUE(forward_backend(a, &chosen).ok());
  EXPECT_EQ(chosen, expected);
  setenv("BLOCKATTN_FORCE_PORTABLE", "1", 1);
  ASSERT_TRUE(forward_backend(a, &chosen).ok());
  unsetenv("BLOCKATTN_FORCE_PORTABLE");
  EXPECT_EQ(chosen, Backend::kPortable);
  a.options.backend = Backend::kPortable;
  ASSERT_TRUE(forward_backend(a, &chosen).ok());
  EXPECT_EQ(chosen, Backend::kPortable);
  a.options.backend = Backend::kHopper;
  const Status s = forward_backend(a, &chosen);
  if (expected == Backend::kHopper)
    EXPECT_EQ(chosen, Backend::kHopper);
  else
    EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;

  // The backward follows the same rule for head_dim 128, grouped-query
  // attention included; kAuto keeps the portable backward at head_dim 64
  // (but for short sequences, grouped heads, and on fast memory).
  DeviceBuffer<__nv_bfloat16> grads(3 * 1000 * 2 * 64);
  BackwardArgs b =
      backward_args(a, make_layout(1000, 2, 64, LayoutKind::kPacked), make_layout(1000, 2, 64, LayoutKind::kPacked),
                    t.get(), grads.get(), grads.get() + 1000 * 128, grads.get() + 2 * 1000 * 128);
  b.options.backend = Backend::kAuto;  // the forward's arguments above ended with kHopper
  ASSERT_TRUE(backward_backend(b, &chosen).ok());
  EXPECT_EQ(chosen, device_has_fast_memory() ? expected : Backend::kPortable);  // head_dim 64
  // ... except for batches of sequences shorter than a block on average
  // (1000 tokens in 20 sequences), where the sm_90 backward is faster.
  b.shape.num_seqs = 20;
  ASSERT_TRUE(backward_backend(b, &chosen).ok());
  EXPECT_EQ(chosen, expected);
  b.shape.num_seqs = 3;
  // ... and for grouped query heads, which its grouped kernel serves
  // (sm90/grouped_backward.cuh): 2 query heads on 1 KV head.
  b.shape.num_kv_heads = 1;
  ASSERT_TRUE(backward_backend(b, &chosen).ok());
  EXPECT_EQ(chosen, expected);
  b.shape.num_kv_heads = 2;
  // Named, the sm_90 backward at head_dim 64 runs for any batch where it was
  // built (a `short` row, in every build that has head_dim 64), and is
  // refused elsewhere.
  const std::vector<Backend> built = device_backends(Operation::kBackward, DType::kBF16, 64, 64, false);
  const bool hopper_d64 = std::find(built.begin(), built.end(), Backend::kHopper) != built.end();
  b.options.backend = Backend::kHopper;
  const Status named = backward_backend(b, &chosen);
  ASSERT_EQ(named.ok(), hopper_d64) << named.message;
  if (hopper_d64) EXPECT_EQ(chosen, Backend::kHopper);
  b.options.backend = Backend::kAuto;
  b.shape.head_dim = 128;  // the same buffers viewed as [500, 2, 128]
  b.shape.total_tokens = 500;
  for (TensorView* view : {&b.q, &b.k, &b.v, &b.dout, &b.dq, &b.dk, &b.dv}) {
    view->token_stride = 256;
    view->head_stride = 128;
  }
  ASSERT_TRUE(backward_backend(b, &chosen).ok());
  EXPECT_EQ(chosen, expected);
  // Grouped-query at head_dim 128: the sm_90 grouped backward
  // (sm90/grouped_backward.cuh).
  b.shape.num_kv_heads = 1;
  ASSERT_TRUE(backward_backend(b, &chosen).ok());
  EXPECT_EQ(chosen, expected);
}

}  // namespace
}  // namespace blockattn
