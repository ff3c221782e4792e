// The one internal description of a request, whatever the entry point (C++
// forward/backward, C ABI): every layer below the public API (validation,
// backend choice, the backends' parameter building) reads this and nothing else.
#pragma once

#include <cstdint>

#include "blockattn/blockattn.h"

namespace blockattn::core {

// An element-wise transform fused into the kernels: one compiled variant of
// every kernel per value (src/kernel_table.cmake, "fusions").
enum class Fusion { kNone = 0, kRotary = 1 };

// The tensors a request can name. Which ones an operation reads and writes is
// listed once, in tensor_roles().
enum class TensorId { kQ, kK, kV, kOut, kDout, kDq, kDk, kDv, kCount };

struct Problem {
  Operation operation = Operation::kForward;
  Shape shape;
  const int32_t* offsets = nullptr;
  TensorView tensors[static_cast<int>(TensorId::kCount)] = {};
  float softmax_scale = 0.f;  // as given; 0 = default (see resolved_scale())
  Backend backend = Backend::kAuto;
  bool reuse_schedule = false;
  Rotary rotary;
  // The short blocks of a call with larger blocks, run at their own block
  // size (shape.block_size) from the split schedule's short tables
  // (schedule/block_schedule.h, "Short blocks"; api/blockattn.cpp): a batch
  // of short sequences to every kernel choice (core/batch_kind.h).
  bool short_blocks = false;

  Fusion fusion() const { return rotary.enabled() ? Fusion::kRotary : Fusion::kNone; }
  const TensorView& tensor(TensorId id) const { return tensors[static_cast<int>(id)]; }
  TensorView& tensor(TensorId id) { return tensors[static_cast<int>(id)]; }
  int group_size() const { return shape.num_q_heads / shape.num_kv_heads; }
  float resolved_scale() const;
  bool empty() const { return shape.num_seqs == 0 || shape.total_tokens == 0; }
};

// Whether a rotary table's rows are 16-byte aligned (its base and row
// stride): where the kernels may read them in 16-byte vectors, and one
// condition of staging them by TMA (core::rotary_rows_stageable).
inline bool rows_16_byte_aligned(const void* table, int64_t row_stride, TableType type) {
  const int64_t elem = type == TableType::kFloat32 ? 4 : 2;
  return reinterpret_cast<uintptr_t>(table) % 16 == 0 && (row_stride * elem) % 16 == 0;
}

Problem describe(const ForwardArgs& args);
Problem describe(const BackwardArgs& args);

// One tensor an operation touches: its name in messages, whether it has the
// query heads or the key/value heads, and whether the operation writes it.
struct TensorRole {
  TensorId id;
  const char* name;
  bool query_heads;
  bool output;
};

struct TensorRoles {
  const TensorRole* begin_;
  const TensorRole* end_;
  const TensorRole* begin() const { return begin_; }
  const TensorRole* end() const { return end_; }
};

TensorRoles tensor_roles(Operation operation);

inline int heads_of(const Shape& s, const TensorRole& r) { return r.query_heads ? s.num_q_heads : s.num_kv_heads; }

}  // namespace blockattn::core
