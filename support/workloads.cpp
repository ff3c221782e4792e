#include "support/workloads.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace blockattn::testing {

LengthBounds length_bounds(int max_len, double fill) {
  LengthBounds b;
  if (fill >= 0.5) {
    b.low = std::max(1, static_cast<int>((2 * fill - 1) * max_len));
    b.high = max_len;
  } else {
    b.low = 1;
    b.high = static_cast<int>(2 * fill * max_len);
  }
  if (b.high < b.low) throw std::invalid_argument("fill and max_len leave no valid length");
  return b;
}

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<int32_t> sequence_lengths(int num_seqs, int max_len, double fill, uint64_t seed) {
  const LengthBounds b = length_bounds(max_len, fill);
  const uint64_t range = static_cast<uint64_t>(b.high - b.low + 1);
  SplitMix64 rng(seed);
  std::vector<int32_t> lengths(num_seqs);
  for (auto& len : lengths)
    len = b.low + static_cast<int32_t>(rng.next() % range);
  return lengths;
}

namespace {

constexpr int kBatch = 1152;

// The two model shapes: D = 128 with 4 heads and D = 64 with 8 (H x D = 512).
int heads_for(int head_dim) { return head_dim == 128 ? 4 : 8; }

Workload make(int head_dim, int max_len, double fill) {
  char name[64];
  if (max_len == 2048 && fill == 0.7)
    std::snprintf(name, sizeof(name), "headline-d%d", head_dim);
  else
    std::snprintf(name, sizeof(name), "sweep-d%d-L%d-f%.1f", head_dim, max_len, fill);
  const int h = heads_for(head_dim);
  return {name, kBatch, h, h, head_dim, max_len, fill};
}

}  // namespace

std::vector<Workload> headline_workloads() { return {make(128, 2048, 0.7), make(64, 2048, 0.7)}; }

std::vector<Workload> sweep_workloads() {
  std::vector<Workload> w;
  for (int d : {128, 64})
    for (int max_len : {256, 512, 1024, 2048})
      for (double fill : {0.5, 0.7, 1.0})
        if (!(max_len == 2048 && fill == 0.7)) w.push_back(make(d, max_len, fill));
  return w;
}

std::vector<Workload> all_workloads() {
  std::vector<Workload> w = headline_workloads();
  const std::vector<Workload> s = sweep_workloads();
  w.insert(w.end(), s.begin(), s.end());
  return w;
}

std::vector<Workload> extra_workloads() {
  return {
      {"gqa-d128-h8x2", kBatch, 8, 2, 128, 2048, 0.7},  // 8 query heads on 2 KV heads
      {"mqa-d64-h8x1", kBatch, 8, 1, 64, 2048, 0.7},    // 8 query heads on 1 KV head
      {"tail-d128", 20000, 4, 4, 128, 63, 0.5},         // every sequence 1-63 tokens: one partial block
      {"tail-d64", 20000, 8, 8, 64, 63, 0.5},
      // The headline batch at the other head dims (issue 11), H = round(512 / D).
      {"headdim-d32-h16", kBatch, 16, 16, 32, 2048, 0.7},
      {"headdim-d96-h5", kBatch, 5, 5, 96, 2048, 0.7},
      {"headdim-d160-h3", kBatch, 3, 3, 160, 2048, 0.7},
      {"headdim-d192-h3", kBatch, 3, 3, 192, 2048, 0.7},
      {"headdim-d224-h2", kBatch, 2, 2, 224, 2048, 0.7},
      {"headdim-d256-h2", kBatch, 2, 2, 256, 2048, 0.7},
  };
}

std::vector<Workload> every_workload() {
  std::vector<Workload> w = all_workloads();
  const std::vector<Workload> e = extra_workloads();
  w.insert(w.end(), e.begin(), e.end());
  return w;
}

const Workload* find_workload(const std::vector<Workload>& workloads, const std::string& name) {
  for (const Workload& w : workloads)
    if (w.name == name) return &w;
  return nullptr;
}

}  // namespace blockattn::testing
