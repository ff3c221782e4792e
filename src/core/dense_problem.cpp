#include "core/dense_problem.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

namespace blockattn::core {
namespace {

#define BLOCKATTN_DENSE_BACKEND_sm80 Backend::kPortable
#define BLOCKATTN_DENSE_BACKEND_sm90 Backend::kHopper
#define BLOCKATTN_DENSE_KERNEL(arch, DT, Type, D, Auto) {BLOCKATTN_DENSE_BACKEND_##arch, DType::k##DT, D, Auto},
// The table's rows and a terminator: a build whose BLOCKATTN_HEAD_DIMS has
// no dense row (e.g. 160 alone) has an empty table, and an array must not be.
constexpr DenseKernelConfig kRowsAndEnd[] = {
#include "blockattn_dense_kernel_table.inc"
    {},
};
#undef BLOCKATTN_DENSE_KERNEL
constexpr DenseKernelTable kRows{kRowsAndEnd, std::size(kRowsAndEnd) - 1};

}  // namespace

float DenseProblem::resolved_scale() const {
  return softmax_scale != 0.f ? softmax_scale : 1.f / std::sqrt(static_cast<float>(shape.head_dim));
}

DenseKernelTable dense_kernel_table() { return kRows; }

const DenseKernelConfig* find_dense_kernel(Backend backend, const DenseProblem& p) {
  for (const DenseKernelConfig& c : kRows)
    if (c.backend == backend && c.dtype == p.shape.dtype && c.head_dim == p.shape.head_dim) return &c;
  return nullptr;
}

bool any_dense_kernel_has_head_dim(int head_dim) {
  return std::any_of(kRows.begin(), kRows.end(), [&](const DenseKernelConfig& c) { return c.head_dim == head_dim; });
}

std::string built_dense_head_dims() {
  std::set<int> dims;
  for (const DenseKernelConfig& c : kRows)
    dims.insert(c.head_dim);
  std::string s;
  for (int d : dims)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}

}  // namespace blockattn::core
