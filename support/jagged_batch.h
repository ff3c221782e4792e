// Host-side helpers shared by the tests and the benchmark: offsets and 16-bit
// element conversion (the workload length generator is in workloads.h).
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "blockattn/blockattn.h"

namespace blockattn::testing {

// offsets[0] = first, offsets[b + 1] = offsets[b] + lengths[b].
inline std::vector<int32_t> offsets_from_lengths(const std::vector<int32_t>& lengths, int32_t first = 0) {
  std::vector<int32_t> offsets{first};
  for (int32_t len : lengths)
    offsets.push_back(offsets.back() + len);
  return offsets;
}

// 16-bit storage <-> double, for T in {__nv_bfloat16, __half}.
template <typename T>
inline T from_double(double x);
template <>
inline __nv_bfloat16 from_double(double x) {
  return __float2bfloat16(static_cast<float>(x));
}
template <>
inline __half from_double(double x) {
  return __float2half(static_cast<float>(x));
}
inline double to_double(__nv_bfloat16 x) { return __bfloat162float(x); }
inline double to_double(__half x) { return __half2float(x); }

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<__nv_bfloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<__half>() {
  return DType::kFP16;
}

}  // namespace blockattn::testing
