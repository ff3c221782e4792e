// Prints every workload at seed 0 as
//   name num_seqs num_q_heads num_kv_heads head_dim max_len fill total first last
// the C++ side of the cross-language workload check
// (tests/check_workload_lengths.py).
#include <cstdio>
#include <numeric>

#include "support/workloads.h"

int main() {
  using namespace blockattn::testing;
  for (const Workload& w : every_workload()) {
    const auto lengths = sequence_lengths(w.num_seqs, w.max_len, w.fill, 0);
    const long long total = std::accumulate(lengths.begin(), lengths.end(), 0LL);
    std::printf("%s %d %d %d %d %d %.1f %lld %d %d\n", w.name.c_str(), w.num_seqs, w.num_q_heads, w.num_kv_heads,
                w.head_dim, w.max_len, w.fill, total, lengths.front(), lengths.back());
  }
  return 0;
}
