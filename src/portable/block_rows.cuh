// Addressing of one head's rows of one block in a strided [T, H, D] tensor.
#pragma once

#include "portable/kernel_params.h"

namespace blockattn::portable {

template <typename T>
__device__ __forceinline__ const T* head_rows(const Strided& t, const schedule::BlockDesc& b, int head) {
  return static_cast<const T*>(t.data) + b.row_begin * t.token_stride + head * t.head_stride;
}
template <typename T>
__device__ __forceinline__ T* head_rows_out(const Strided& t, const schedule::BlockDesc& b, int head) {
  return static_cast<T*>(t.data) + b.row_begin * t.token_stride + head * t.head_stride;
}

}  // namespace blockattn::portable
