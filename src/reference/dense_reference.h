// CPU reference of the dense forward (blockattn/dense.h), accumulating in
// fp64. Tensors are contiguous [B, H, S, D] arrays of double. Used by the
// tests, never by the library.
#pragma once

#include <cstdint>
#include <vector>

namespace blockattn::reference {

struct DenseProblem {
  int64_t batch = 1, seq_len = 1;
  int num_q_heads = 1, num_kv_heads = 1, head_dim = 64;
  bool causal = false;
  double scale = 0.0;  // 0 = 1/sqrt(head_dim)
};

// out[b, h, i] = softmax(scale q_i K^T + mask) V over the keys of kv head
// h / (Hq / Hkv); lse[b, h, i] = log sum_j exp(scale q_i . k_j + mask) when
// `lse` is given.
void dense_forward(const DenseProblem& p, const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, std::vector<double>& out, std::vector<double>* lse = nullptr);

}  // namespace blockattn::reference
