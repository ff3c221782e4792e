// Benchmark of block-diagonal jagged attention on the workloads of
// docs/workloads.md (support/workloads.h): forward and backward time (CUDA events, warm-up, median),
// effective bandwidth, % of a device-to-device copy measured in the same run,
// and TFLOP/s. Each workload is spot-checked against the fp64 CPU reference
// before it is timed.
//
//   bench_blockattn [--workloads a,b,...] [--sweep] [--extra] [--reps N] [--json PATH]
//                   [--backend auto|portable|hopper] [--rotary] [--block-size N] [--dtype bf16|fp16]
//                   [--layout token-major|head-major]
// --rotary also times each workload with rotary embeddings fused (q, k and v
// rotated, half-split pairs, positions within each sequence, an fp32 table of
// max_len rows, then the same table in the inputs' 16-bit type) and prints the
// ratios to the plain kernels of the same run. --dtype fp16 runs the same
// workloads in fp16 (docs/workloads.md defines them in bf16). --layout
// head-major lays every tensor out as [heads, T, D] (each head's rows
// contiguous) instead of the packed [T, heads, D].
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/bench_timing.cuh"
#include "blockattn/blockattn.h"
#include "reference/reference.h"
#include "support/device_buffer.h"
#include "support/jagged_batch.h"
#include "support/tensor_layout.h"
#include "support/workloads.h"

namespace {

using namespace blockattn;
using namespace blockattn::testing;
using namespace blockattn::bench;

// Host copy of heads [first, first + count) of one block's rows of a
// [T, heads, D] tensor laid out as `l`, as dense fp64 [n, count, D].
template <typename T>
std::vector<double> block_rows(const DeviceBuffer<T>& t, const Layout& l, const schedule::BlockDesc& b, int first,
                               int count, int dim) {
  std::vector<T> rows(static_cast<size_t>(b.row_count) * count * dim);
  for (int h = 0; h < count; ++h)  // one strided copy per head: b.row_count rows of dim elements
    BA_CHECK_CUDA(cudaMemcpy2D(rows.data() + size_t(h) * dim, size_t(count) * dim * sizeof(T),
                               t.get() + l.at(b.row_begin, first + h, 0), l.token_stride * sizeof(T), dim * sizeof(T),
                               b.row_count, cudaMemcpyDeviceToHost));
  std::vector<double> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    out[i] = to_double(rows[i]);
  return out;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(e / r);
}

// Packed [T, Hq, D] (q, out, dout, dq) and [T, Hkv, D] (k, v, dk, dv) tensors.
template <typename T>
struct Tensors {
  DeviceBuffer<T> q, k, v, out, dout, dq, dk, dv;
  Tensors(size_t nq, size_t nkv) : q(nq), k(nkv), v(nkv), out(nq), dout(nq), dq(nq), dk(nkv), dv(nkv) {}
};

// Worst relative L2 error over a sample of (block, KV head) pairs, with all
// query heads of the group, forward and backward outputs, against the fp64
// reference on the same 16-bit inputs.
template <typename T>
double spot_check(const Tensors<T>& t, const Layout& ql, const Layout& kl,
                  const std::vector<schedule::BlockDesc>& blocks, const Workload& w, int block_size) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<size_t> pick(0, blocks.size() - 1);
  double worst = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const auto b = trial == 0 ? blocks.back() : blocks[pick(rng)];  // include a partial last block
    const int kv_head = trial % w.num_kv_heads, group = w.num_q_heads / w.num_kv_heads;
    reference::Problem p;
    p.total_tokens = b.row_count;
    p.num_q_heads = group;
    p.num_kv_heads = 1;
    p.head_dim = w.head_dim;
    p.offsets = {0, b.row_count};
    p.block_size = block_size;
    auto get_q = [&](const DeviceBuffer<T>& x) { return block_rows(x, ql, b, kv_head * group, group, w.head_dim); };
    auto get_kv = [&](const DeviceBuffer<T>& x) { return block_rows(x, kl, b, kv_head, 1, w.head_dim); };
    const auto q = get_q(t.q), k = get_kv(t.k), v = get_kv(t.v), dout = get_q(t.dout);
    std::vector<double> out(q.size()), dq(q.size()), dk(k.size()), dv(k.size());
    reference::forward(p, q, k, v, out);
    reference::backward(p, q, k, v, dout, dq, dk, dv);
    worst = std::max({worst, rel_l2(get_q(t.out), out), rel_l2(get_q(t.dq), dq), rel_l2(get_kv(t.dk), dk),
                      rel_l2(get_kv(t.dv), dv)});
  }
  return worst;
}

struct Result {
  Workload w;
  int64_t tokens;
  double fwd_ms, bwd_ms, fwd_floor_ms, bwd_floor_ms, fwd_tflops, bwd_tflops, max_rel_err;
  double rotary_fwd_ms = 0, rotary_bwd_ms = 0;            // with --rotary: fp32 table
  double rotary_bf16_fwd_ms = 0, rotary_bf16_bwd_ms = 0;  // 16-bit table (the inputs' type)
  // The paths that ran them, [fp32 table, 16-bit table] (kAuto's choice may
  // differ by table type); "-" where the backward was not measured.
  const char* rotary_fwd_path[2] = {"-", "-"};
  const char* rotary_bwd_path[2] = {"-", "-"};
};

// The path forward()/backward() takes for these arguments.
const char* forward_path(const ForwardArgs& a) {
  Backend b;
  return forward_backend(a, &b).ok() ? backend_name(b) : "-";
}
const char* backward_path(const BackwardArgs& a) {
  Backend b;
  return backward_backend(a, &b).ok() ? backend_name(b) : "-";
}

template <typename Elem>
Result run(const Workload& w, double copy_tbs, int reps, Backend backend, bool with_rotary, int block_size,
           LayoutKind layout) {
  constexpr bool kHalf = std::is_same_v<Elem, __half>;
  const auto lengths = sequence_lengths(w.num_seqs, w.max_len, w.fill, /*seed=*/0);
  const auto offsets = offsets_from_lengths(lengths);
  const int64_t T = offsets.back();
  const size_t nq = static_cast<size_t>(T) * w.num_q_heads * w.head_dim;
  const size_t nkv = static_cast<size_t>(T) * w.num_kv_heads * w.head_dim;

  Tensors<Elem> t(nq, nkv);
  randomize(t.q, 1);
  randomize(t.k, 2);
  randomize(t.v, 3);
  randomize(t.dout, 4);
  DeviceBuffer<int32_t> d_offsets(offsets.size());
  d_offsets.upload(offsets);
  DeviceBuffer<unsigned char> ws(workspace_size(w.num_seqs, T));

  const Shape shape{w.num_seqs, T, w.num_q_heads, w.num_kv_heads, w.head_dim, kHalf ? DType::kFP16 : DType::kBF16,
                    block_size};
  const Layout ql = make_layout(T, w.num_q_heads, w.head_dim, layout);
  const Layout kl = make_layout(T, w.num_kv_heads, w.head_dim, layout);
  ForwardArgs fa;
  fa.shape = shape;
  fa.offsets = d_offsets.get();
  fa.q = ql.view(t.q.get());
  fa.k = kl.view(t.k.get());
  fa.v = kl.view(t.v.get());
  fa.out = ql.view(t.out.get());
  fa.options.backend = backend;
  BackwardArgs ba;
  static_cast<AttentionInputs&>(ba) = fa;
  ba.dout = ql.view(t.dout.get());
  ba.dq = ql.view(t.dq.get());
  ba.dk = kl.view(t.dk.get());
  ba.dv = kl.view(t.dv.get());

  auto check = [](const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      std::exit(1);
    }
  };
  auto fwd = [&] { check(forward(fa, ws.get(), ws.bytes(), nullptr)); };
  auto bwd = [&] { check(backward(ba, ws.get(), ws.bytes(), nullptr)); };
  fwd();
  bwd();
  BA_CHECK_CUDA(cudaDeviceSynchronize());

  Result r{w, T, 0, 0, 0, 0, 0, 0, 0};
  const auto blocks = reference::block_schedule(offsets, static_cast<int32_t>(T), block_size);
  r.max_rel_err = spot_check(t, ql, kl, blocks, w, block_size);
  r.fwd_ms = median_ms(fwd, reps);
  r.bwd_ms = median_ms(bwd, reps);
  if (with_rotary) {
    const int half = w.head_dim / 2;
    std::vector<float> table(2 * static_cast<size_t>(w.max_len) * half);  // [cos rows | sin rows]
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<float>(std::cos(0.001 * static_cast<double>(i)));
    DeviceBuffer<float> d_table(table.size());
    d_table.upload(table);
    Rotary rot;
    rot.rotary_dim = w.head_dim;
    rot.rotate_v = true;
    rot.cos = d_table.get();
    rot.sin = d_table.get() + static_cast<size_t>(w.max_len) * half;
    rot.cos_row_stride = rot.sin_row_stride = half;
    rot.num_positions = w.max_len;
    fa.rotary = ba.rotary = rot;
    // A backend may have the rotary forward and not its backward (sm80 at
    // D = 128 with 128-token blocks): the forward is still timed, the
    // backward reported as missing (nan in the table, null in the JSON).
    const Status rotary_bwd = backward(ba, ws.get(), ws.bytes(), nullptr);
    if (!rotary_bwd.ok())
      std::fprintf(stderr, "%s: rotary forward only (%s)\n", w.name.c_str(), rotary_bwd.message.c_str());
    auto rotary_bwd_ms = [&] { return rotary_bwd.ok() ? median_ms(bwd, reps) : std::nan(""); };
    fwd();
    BA_CHECK_CUDA(cudaDeviceSynchronize());
    r.rotary_fwd_ms = median_ms(fwd, reps);
    r.rotary_bwd_ms = rotary_bwd_ms();
    r.rotary_fwd_path[0] = forward_path(fa);
    if (rotary_bwd.ok()) r.rotary_bwd_path[0] = backward_path(ba);
    // The same table in the inputs' 16-bit type (half the angle bytes per tile).
    std::vector<Elem> table16(table.size());
    for (size_t i = 0; i < table.size(); ++i)
      table16[i] = from_double<Elem>(table[i]);
    DeviceBuffer<Elem> d_table16(table16.size());
    d_table16.upload(table16);
    fa.rotary.table_type = ba.rotary.table_type = kHalf ? TableType::kFP16 : TableType::kBF16;
    fa.rotary.cos = ba.rotary.cos = d_table16.get();
    fa.rotary.sin = ba.rotary.sin = d_table16.get() + static_cast<size_t>(w.max_len) * half;
    fwd();
    if (rotary_bwd.ok()) bwd();
    BA_CHECK_CUDA(cudaDeviceSynchronize());
    r.rotary_bf16_fwd_ms = median_ms(fwd, reps);
    r.rotary_bf16_bwd_ms = rotary_bwd_ms();
    r.rotary_fwd_path[1] = forward_path(fa);
    if (rotary_bwd.ok()) r.rotary_bwd_path[1] = backward_path(ba);
    fa.rotary = ba.rotary = Rotary{};
  }

  // Bytes that must move: forward q, k, v, out; backward q, k, v, dout, dq, dk, dv.
  const double q_bytes = static_cast<double>(nq) * 2, kv_bytes = static_cast<double>(nkv) * 2;
  r.fwd_floor_ms = (2 * q_bytes + 2 * kv_bytes) / (copy_tbs * 1e12) * 1e3;
  r.bwd_floor_ms = (3 * q_bytes + 4 * kv_bytes) / (copy_tbs * 1e12) * 1e3;
  double sum_sq = 0;  // sum over blocks of len^2
  for (const auto& b : blocks)
    sum_sq += double(b.row_count) * b.row_count;
  const double fwd_flops = 4.0 * w.num_q_heads * w.head_dim * sum_sq;
  r.fwd_tflops = fwd_flops / (r.fwd_ms * 1e-3) / 1e12;
  r.bwd_tflops = 2.5 * fwd_flops / (r.bwd_ms * 1e-3) / 1e12;
  return r;
}

// A time for the JSON: null where it was not measured (NaN).
std::string json_ms(double ms) {
  if (std::isnan(ms)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", ms);
  return buf;
}

void write_json(const char* path, const std::vector<Result>& results, double copy_tbs, const char* gpu,
                const char* dtype, const char* backend, int block_size, const char* layout) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::perror(path);
    std::exit(1);
  }
  std::fprintf(f,
               "{\n  \"gpu\": \"%s\",\n  \"dtype\": \"%s\",\n  \"backend\": \"%s\",\n  \"block_size\": %d,\n"
               "  \"layout\": \"%s\",\n  \"copy_tb_per_s\": %.4f,\n  \"results\": [\n",
               gpu, dtype, backend, block_size, layout, copy_tbs);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"workload\": \"%s\", \"num_seqs\": %d, \"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
                 "\"max_len\": %d, "
                 "\"fill\": %.2f, \"tokens\": %lld, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_floor_ms\": %.4f, "
                 "\"bwd_floor_ms\": %.4f, \"fwd_pct_copy\": %.2f, \"bwd_pct_copy\": %.2f, \"fwd_tflops\": %.2f, "
                 "\"bwd_tflops\": %.2f, \"max_rel_err\": %.3e, \"rotary_fwd_ms\": %.4f, \"rotary_bwd_ms\": %s, "
                 "\"rotary_bf16_fwd_ms\": %.4f, \"rotary_bf16_bwd_ms\": %s, \"rotary_fwd_paths\": [\"%s\", \"%s\"], "
                 "\"rotary_bwd_paths\": [\"%s\", \"%s\"]}%s\n",
                 r.w.name.c_str(), r.w.num_seqs, r.w.num_q_heads, r.w.num_kv_heads, r.w.head_dim, r.w.max_len, r.w.fill,
                 static_cast<long long>(r.tokens), r.fwd_ms, r.bwd_ms, r.fwd_floor_ms, r.bwd_floor_ms,
                 100 * r.fwd_floor_ms / r.fwd_ms, 100 * r.bwd_floor_ms / r.bwd_ms, r.fwd_tflops, r.bwd_tflops,
                 r.max_rel_err, r.rotary_fwd_ms, json_ms(r.rotary_bwd_ms).c_str(), r.rotary_bf16_fwd_ms,
                 json_ms(r.rotary_bf16_bwd_ms).c_str(), r.rotary_fwd_path[0], r.rotary_fwd_path[1],
                 r.rotary_bwd_path[0], r.rotary_bwd_path[1], i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Workload> workloads = headline_workloads();
  int reps = 30;
  bool with_rotary = false, fp16 = false;
  int block_size = kDefaultBlockSize;
  std::string json;
  Backend backend = Backend::kAuto;
  LayoutKind layout = LayoutKind::kPacked;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--extra") {  // grouped-query, multi-query and tail-heavy batches
      const auto e = extra_workloads();
      workloads.insert(workloads.end(), e.begin(), e.end());
    } else if (a == "--sweep") {
      const auto s = sweep_workloads();
      workloads.insert(workloads.end(), s.begin(), s.end());
    } else if (a == "--workloads") {
      const std::string names = value();
      const std::vector<Workload> all = every_workload();
      workloads.clear();
      for (size_t begin = 0; begin <= names.size();) {
        const size_t end = std::min(names.find(',', begin), names.size());
        const std::string name = names.substr(begin, end - begin);
        const Workload* w = find_workload(all, name);
        if (w == nullptr) {
          std::fprintf(stderr, "unknown workload '%s' (docs/workloads.md lists them)\n", name.c_str());
          return 2;
        }
        workloads.push_back(*w);
        begin = end + 1;
      }
    } else if (a == "--rotary") {
      with_rotary = true;
    } else if (a == "--dtype") {
      const std::string d = value();
      if (d != "bf16" && d != "fp16") {
        std::fprintf(stderr, "--dtype takes bf16 or fp16, not '%s'\n", d.c_str());
        return 2;
      }
      fp16 = d == "fp16";
    } else if (a == "--layout") {
      const std::string l = value();
      if (l != "token-major" && l != "head-major") {
        std::fprintf(stderr, "--layout takes token-major or head-major, not '%s'\n", l.c_str());
        return 2;
      }
      layout = l == "head-major" ? LayoutKind::kHeadMajor : LayoutKind::kPacked;
    } else if (a == "--block-size") {
      block_size = std::atoi(value().c_str());
    } else if (a == "--reps") {
      reps = std::max(20, std::atoi(value().c_str()));
    } else if (a == "--json") {
      json = value();
    } else if (a == "--backend") {
      const std::string b = value();
      backend = b == "portable" ? Backend::kPortable : b == "hopper" ? Backend::kHopper : Backend::kAuto;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--workloads a,b] [--sweep] [--extra] [--reps N>=20] [--json PATH] [--backend "
                   "auto|portable|hopper] "
                   "[--rotary] [--block-size N] [--dtype bf16|fp16] [--layout token-major|head-major]\n",
                   argv[0]);
      return 2;
    }
  }
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) {
    std::fprintf(stderr, "bench_blockattn: %s: nothing to measure without a CUDA GPU\n", why.c_str());
    return 2;
  }
  cudaDeviceProp prop;
  BA_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const char* layout_name = layout == LayoutKind::kHeadMajor ? "head-major" : "token-major";
  const double copy_tbs = copy_bandwidth_tbs(reps);
  static const char* kBackendNames[] = {"auto", "portable", "hopper"};
  std::printf(
      "GPU: %s (%d SMs)   device-to-device copy: %.3f TB/s (read + write)   forward backend: %s   dtype: %s   layout: "
      "%s\n",
      prop.name, prop.multiProcessorCount, copy_tbs, kBackendNames[static_cast<int>(backend)], fp16 ? "fp16" : "bf16",
      layout_name);

  std::vector<Result> results;
  bool accurate = true;
  for (const auto& w : workloads) {
    results.push_back(fp16 ? run<__half>(w, copy_tbs, reps, backend, with_rotary, block_size, layout)
                           : run<bf16>(w, copy_tbs, reps, backend, with_rotary, block_size, layout));
    const Result& r = results.back();
    accurate &= r.max_rel_err <= 1e-2;
    std::fflush(stdout);
  }
  std::printf("\n%-24s %9s %9s %9s %7s %8s %9s %9s %7s %8s %9s\n", "workload", "tokens", "fwd ms", "fwd TB/s",
              "fwd %cp", "fwd TF/s", "bwd ms", "bwd TB/s", "bwd %cp", "bwd TF/s", "max err");
  for (const Result& r : results) {
    const double fwd_tbs = copy_tbs * r.fwd_floor_ms / r.fwd_ms, bwd_tbs = copy_tbs * r.bwd_floor_ms / r.bwd_ms;
    std::printf("%-24s %9lld %9.3f %9.3f %6.1f%% %8.1f %9.3f %9.3f %6.1f%% %8.1f %9.2e\n", r.w.name.c_str(),
                static_cast<long long>(r.tokens), r.fwd_ms, fwd_tbs, 100 * r.fwd_floor_ms / r.fwd_ms, r.fwd_tflops,
                r.bwd_ms, bwd_tbs, 100 * r.bwd_floor_ms / r.bwd_ms, r.bwd_tflops, r.max_rel_err);
  }
  if (with_rotary) {
    std::printf(
        "\nfused rotary (q, k, v rotated), same run; fp32 table, then bf16 table, and the paths that ran them "
        "(fp32 / bf16 table):\n%-24s %9s %9s %7s %9s %9s %7s %8s %8s  %-17s %s\n",
        "workload", "fwd ms", "rope ms", "ratio", "bwd ms", "rope ms", "ratio", "bf16 fwd", "bf16 bwd", "fwd paths",
        "bwd paths");
    for (const Result& r : results) {
      char fwd_paths[40], bwd_paths[40];
      std::snprintf(fwd_paths, sizeof fwd_paths, "%s/%s", r.rotary_fwd_path[0], r.rotary_fwd_path[1]);
      std::snprintf(bwd_paths, sizeof bwd_paths, "%s/%s", r.rotary_bwd_path[0], r.rotary_bwd_path[1]);
      std::printf("%-24s %9.3f %9.3f %6.3fx %9.3f %9.3f %6.3fx %7.3fx %7.3fx  %-17s %s\n", r.w.name.c_str(), r.fwd_ms,
                  r.rotary_fwd_ms, r.rotary_fwd_ms / r.fwd_ms, r.bwd_ms, r.rotary_bwd_ms, r.rotary_bwd_ms / r.bwd_ms,
                  r.rotary_bf16_fwd_ms / r.fwd_ms, r.rotary_bf16_bwd_ms / r.bwd_ms, fwd_paths, bwd_paths);
    }
  }
  if (!json.empty())
    write_json(json.c_str(), results, copy_tbs, prop.name, fp16 ? "fp16" : "bf16",
               kBackendNames[static_cast<int>(backend)], block_size, layout_name);
  if (!accurate) {
    std::fprintf(stderr, "bench_blockattn: a spot check exceeded relative L2 error 1e-2\n");
    return 1;
  }
  return 0;
}
