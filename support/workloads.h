// The benchmark workloads of docs/workloads.md and their length generator,
// shared by the C++ benchmark and tests. python/blockattn/lengths.py
// implements the same generator; tests/cpu/workloads_test.cpp and the
// cross-language ctest check that both give the same lengths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace blockattn::testing {

struct Workload {
  std::string name;
  int num_seqs;
  int num_q_heads, num_kv_heads;
  int head_dim;
  int max_len;
  double fill;
};

// Inclusive [low, high] of a workload's lengths; their mean is fill * max_len.
struct LengthBounds {
  int low, high;
};
LengthBounds length_bounds(int max_len, double fill);

// SplitMix64: the generator's one source of randomness, chosen because it is
// a few lines in any language (std::mt19937_64 distributions and torch.randint
// are not portable across libraries).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();

 private:
  uint64_t state_;
};

// num_seqs lengths: low + next() % (high - low + 1), in order.
std::vector<int32_t> sequence_lengths(int num_seqs, int max_len, double fill, uint64_t seed);

std::vector<Workload> headline_workloads();
std::vector<Workload> sweep_workloads();  // contains neither headline
std::vector<Workload> all_workloads();    // headline, then sweep
// Grouped-query, multi-query and tail-heavy batches (issue 10) and the
// headline batch at the other head dims (issue 11);
// not part of the headline/sweep grid.
std::vector<Workload> extra_workloads();
std::vector<Workload> every_workload();  // all_workloads(), then extra_workloads()
// The workload of that name, or null.
const Workload* find_workload(const std::vector<Workload>& workloads, const std::string& name);

}  // namespace blockattn::testing
