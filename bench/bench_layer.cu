// Benchmark of the fused projection layer (blockattn/layer.h) on the
// workloads of docs/workloads.md: x [T, C] with C = Hq D, weight [N, C],
// bias. Times (CUDA events, median) in one run:
//   attention   plain blockattn forward / backward on contiguous q, k, v
//   layer       layer_forward / layer_backward without rotary: the GEMMs
//               alone plus the plain attention on z's slices
//   layer+rope  the same with rotary fused (q, k and v rotated, half-split,
//               positions in sequence, an fp32 [max_len, D/2] table)
// and prints layer+rope / layer (issue 8's bar: within 1.10x) and the GEMMs'
// share (layer - attention).
//
//   bench_layer [--workloads a,b,...] [--reps N]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_timing.cuh"
#include "blockattn/layer.h"
#include "support/workloads.h"

namespace {

using namespace blockattn;
using namespace blockattn::bench;
using testing::every_workload;
using testing::find_workload;
using testing::Workload;

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message.c_str());
    std::exit(1);
  }
}

// Fills an fp32 [rows, half] table with cos or sin of position * 10000^(-j / half).
void fill_angles(DeviceBuffer<float>& table, int rows, int half, bool sine) {
  std::vector<float> host(static_cast<size_t>(rows) * half);
  for (int p = 0; p < rows; ++p)
    for (int j = 0; j < half; ++j) {
      const double angle = p * std::pow(10000.0, -static_cast<double>(j) / half);
      host[static_cast<size_t>(p) * half + j] = static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
    }
  table.upload(host);
}

void run(const Workload& w, int reps) {
  const std::vector<int32_t> lengths = testing::sequence_lengths(w.num_seqs, w.max_len, w.fill, /*seed=*/0);
  std::vector<int32_t> offsets = {0};
  for (int32_t n : lengths)
    offsets.push_back(offsets.back() + n);
  const int64_t tokens = offsets.back();
  const int hq = w.num_q_heads, hkv = w.num_kv_heads, dim = w.head_dim, channels = hq * dim;
  const int64_t width = int64_t{hq + 2 * hkv} * dim;

  DeviceBuffer<int32_t> d_offsets(offsets.size());
  d_offsets.upload(offsets);
  DeviceBuffer<bf16> x(tokens * channels), weight(width * channels), bias(width), z(tokens * width),
      out(tokens * hq * dim), dout(tokens * hq * dim), dz(tokens * width), dx(tokens * channels),
      dweight(width * channels), dbias(width);
  randomize(x, 1), randomize(weight, 2), randomize(bias, 3), randomize(dout, 4);
  DeviceBuffer<char> workspace(layer_workspace_size(w.num_seqs, tokens));
  DeviceBuffer<float> cos(size_t{1} * w.max_len * dim / 2), sin(size_t{1} * w.max_len * dim / 2);
  fill_angles(cos, w.max_len, dim / 2, false);
  fill_angles(sin, w.max_len, dim / 2, true);

  LayerForwardArgs fa;
  fa.shape = {w.num_seqs, tokens, channels, hq, hkv, dim, DType::kBF16, kDefaultBlockSize};
  fa.offsets = d_offsets.get();
  fa.x = x.get(), fa.weight = weight.get(), fa.bias = bias.get();
  fa.z = z.get(), fa.out = out.get();
  LayerBackwardArgs ba;
  static_cast<LayerInputs&>(ba) = fa;
  ba.options.reuse_schedule = true;  // the forward's, as a training step would
  ba.z = z.get(), ba.dout = dout.get(), ba.dz = dz.get();
  ba.dx = dx.get(), ba.dweight = dweight.get(), ba.dbias = dbias.get();
  auto layer_fwd = [&] { check(layer_forward(fa, workspace.get(), workspace.bytes(), nullptr), "layer_forward"); };
  auto layer_bwd = [&] { check(layer_backward(ba, workspace.get(), workspace.bytes(), nullptr), "layer_backward"); };
  layer_fwd();
  const double fwd = median_ms(layer_fwd, reps), bwd = median_ms(layer_bwd, reps);

  Rotary rot;
  rot.rotary_dim = dim;
  rot.rotate_v = true;
  rot.cos = cos.get(), rot.sin = sin.get();
  rot.cos_row_stride = rot.sin_row_stride = dim / 2;
  rot.num_positions = w.max_len;
  fa.rotary = ba.rotary = rot;
  layer_fwd();
  const double rope_fwd = median_ms(layer_fwd, reps), rope_bwd = median_ms(layer_bwd, reps);

  // The plain attention alone, on contiguous q, k, v (the z and dz buffers
  // reused as storage: [T, Hq, D] and two [T, Hkv, D] fit in [T, N]).
  BackwardArgs att;
  att.shape = {w.num_seqs, tokens, hq, hkv, dim, DType::kBF16, kDefaultBlockSize};
  att.offsets = d_offsets.get();
  const int64_t q_elems = tokens * hq * dim, kv_elems = tokens * hkv * dim;
  att.q = {z.get(), int64_t{hq} * dim, dim};
  att.k = {z.get() + q_elems, int64_t{hkv} * dim, dim};
  att.v = {z.get() + q_elems + kv_elems, int64_t{hkv} * dim, dim};
  att.dout = {dout.get(), int64_t{hq} * dim, dim};
  att.dq = {dz.get(), int64_t{hq} * dim, dim};
  att.dk = {dz.get() + q_elems, int64_t{hkv} * dim, dim};
  att.dv = {dz.get() + q_elems + kv_elems, int64_t{hkv} * dim, dim};
  ForwardArgs att_fwd;
  static_cast<AttentionInputs&>(att_fwd) = att;
  att_fwd.out = {out.get(), int64_t{hq} * dim, dim};
  auto attention_fwd = [&] { check(forward(att_fwd, workspace.get(), workspace.bytes(), nullptr), "forward"); };
  auto attention_bwd = [&] { check(backward(att, workspace.get(), workspace.bytes(), nullptr), "backward"); };
  const double att_f = median_ms(attention_fwd, reps), att_b = median_ms(attention_bwd, reps);

  std::printf("%-24s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.3fx %7.3fx\n", w.name.c_str(), att_f, att_b, fwd, bwd,
              rope_fwd, rope_bwd, (fwd + bwd) - (att_f + att_b), rope_fwd / fwd, (rope_fwd + rope_bwd) / (fwd + bwd));
}

}  // namespace

int main(int argc, char** argv) {
  std::string names = "headline-d128,headline-d64";
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--workloads" && i + 1 < argc) {
      names = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_layer [--workloads a,b,...] [--reps N]\n");
      return 2;
    }
  }
  const std::string why = testing::gpu_unavailable_reason();
  if (!why.empty()) {
    std::fprintf(stderr, "bench_layer needs a GPU: %s\n", why.c_str());
    return 1;
  }
  cudaDeviceProp prop;
  BA_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s   copy %.3f TB/s; bf16, C = Hq D, q/k/v rotated for +rope; ms (median of %d)\n", prop.name,
              copy_bandwidth_tbs(reps), reps);
  std::printf("%-24s %9s %9s %9s %9s %9s %9s %9s %8s %8s\n", "workload", "attn fwd", "attn bwd", "layer f", "layer b",
              "rope f", "rope b", "GEMMs", "rope/f", "rope/f+b");
  const std::vector<Workload> all = every_workload();
  size_t start = 0;
  while (start <= names.size()) {
    const size_t comma = names.find(',', start);
    const std::string name = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!name.empty()) {
      const Workload* w = find_workload(all, name);
      if (w == nullptr) {
        std::fprintf(stderr, "unknown workload %s\n", name.c_str());
        return 2;
      }
      run(*w, reps);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return 0;
}
