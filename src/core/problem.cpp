#include "core/problem.h"

#include <cmath>
#include <iterator>

namespace blockattn::core {
namespace {

constexpr TensorRole kForwardRoles[] = {
    {TensorId::kQ, "q", true, false},
    {TensorId::kK, "k", false, false},
    {TensorId::kV, "v", false, false},
    {TensorId::kOut, "out", true, true},
};

constexpr TensorRole kBackwardRoles[] = {
    {TensorId::kQ, "q", true, false},       {TensorId::kK, "k", false, false}, {TensorId::kV, "v", false, false},
    {TensorId::kDout, "dout", true, false}, {TensorId::kDq, "dq", true, true}, {TensorId::kDk, "dk", false, true},
    {TensorId::kDv, "dv", false, true},
};

Problem common(Operation op, const AttentionInputs& in) {
  Problem p;
  p.operation = op;
  p.shape = in.shape;
  p.offsets = in.offsets;
  p.tensor(TensorId::kQ) = in.q;
  p.tensor(TensorId::kK) = in.k;
  p.tensor(TensorId::kV) = in.v;
  p.softmax_scale = in.options.softmax_scale;
  p.backend = in.options.backend;
  p.reuse_schedule = in.options.reuse_schedule;
  p.rotary = in.rotary;
  return p;
}

}  // namespace

// The default in double, rounded once: the value Python passes for scale=None
// (1 / math.sqrt(D) as a C float), so every route gives the same bits.
float Problem::resolved_scale() const {
  return softmax_scale != 0.f ? softmax_scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
}

Problem describe(const ForwardArgs& a) {
  Problem p = common(Operation::kForward, a);
  p.tensor(TensorId::kOut) = a.out;
  return p;
}

Problem describe(const BackwardArgs& a) {
  Problem p = common(Operation::kBackward, a);
  p.tensor(TensorId::kDout) = a.dout;
  p.tensor(TensorId::kDq) = a.dq;
  p.tensor(TensorId::kDk) = a.dk;
  p.tensor(TensorId::kDv) = a.dv;
  return p;
}

TensorRoles tensor_roles(Operation op) {
  if (op == Operation::kForward) return {std::begin(kForwardRoles), std::end(kForwardRoles)};
  return {std::begin(kBackwardRoles), std::end(kBackwardRoles)};
}

}  // namespace blockattn::core
