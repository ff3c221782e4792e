// The argument checks block attention and the dense forward share
// (api/validate.cpp, api/validate_dense.cpp): element size and alignment
// rules, head counts, dtype and backend values.
#pragma once

#include <cstdint>

#include "blockattn/blockattn.h"
#include "core/status.h"

namespace blockattn::api {

inline constexpr int64_t kElementBytes = 2;  // bf16 and fp16
inline constexpr int64_t kAlignElems = kTensorAlignmentBytes / kElementBytes;

inline bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kTensorAlignmentBytes == 0; }

inline Status check_heads(int num_q_heads, int num_kv_heads) {
  if (num_q_heads < 1) return core::invalid("num_q_heads must be >= 1; got ", num_q_heads);
  if (num_kv_heads < 1) return core::invalid("num_kv_heads must be >= 1; got ", num_kv_heads);
  if (num_q_heads % num_kv_heads != 0)
    return core::invalid("num_q_heads must be a multiple of num_kv_heads; got num_q_heads=", num_q_heads,
                         ", num_kv_heads=", num_kv_heads);
  return Status::Ok();
}

inline Status check_dtype(DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kFP16)
    return core::invalid("dtype must be kBF16 or kFP16; got ", static_cast<int>(dtype));
  return Status::Ok();
}

inline Status check_backend(Backend backend) {
  if (backend != Backend::kAuto && backend != Backend::kPortable && backend != Backend::kHopper)
    return core::invalid("backend must be kAuto, kPortable or kHopper; got ", static_cast<int>(backend));
  return Status::Ok();
}

}  // namespace blockattn::api
