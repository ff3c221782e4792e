#include "reference/dense_reference.h"

#include <algorithm>
#include <cmath>

namespace blockattn::reference {

void dense_forward(const DenseProblem& p, const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, std::vector<double>& out, std::vector<double>* lse) {
  const int64_t S = p.seq_len;
  const int D = p.head_dim, group = p.num_q_heads / p.num_kv_heads;
  const double scale = p.scale != 0.0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(D));
  out.assign(static_cast<size_t>(p.batch * p.num_q_heads * S * D), 0.0);
  if (lse != nullptr) lse->assign(static_cast<size_t>(p.batch * p.num_q_heads * S), 0.0);
  std::vector<double> logits(static_cast<size_t>(S));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.num_q_heads; ++h) {
      const size_t q_base = static_cast<size_t>((b * p.num_q_heads + h) * S * D);
      const size_t kv_base = static_cast<size_t>((b * p.num_kv_heads + h / group) * S * D);
      for (int64_t i = 0; i < S; ++i) {
        const int64_t keys = p.causal ? i + 1 : S;
        double max = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += q[q_base + i * D + d] * k[kv_base + j * D + d];
          logits[j] = scale * dot;
          max = std::max(max, logits[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          logits[j] = std::exp(logits[j] - max);
          sum += logits[j];
        }
        double* o = &out[q_base + i * D];
        for (int64_t j = 0; j < keys; ++j)
          for (int d = 0; d < D; ++d)
            o[d] += logits[j] / sum * v[kv_base + j * D + d];
        if (lse != nullptr) (*lse)[static_cast<size_t>((b * p.num_q_heads + h) * S + i)] = max + std::log(sum);
      }
    }
}

}  // namespace blockattn::reference
