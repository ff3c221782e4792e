// How a [T, H, D] tensor sits in memory, for the tests and the benchmark:
// the strides a TensorView of it carries, and which elements it can touch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "blockattn/blockattn.h"

namespace blockattn::testing {

enum class LayoutKind {
  kPacked,     // [T, H, D] contiguous (the layout docs/workloads.md defines)
  kPadded,     // strided rows with gaps between heads and tokens
  kHeadMajor,  // [H, T, D]: token stride D, head stride T * D
};

// A [T, H, D] tensor's layout in memory.
struct Layout {
  int heads, dim;
  int64_t token_stride, head_stride;
  int64_t tokens;
  // Elements from the first to one past the last that the view can touch.
  size_t elems() const {
    return tokens == 0 ? 0 : static_cast<size_t>((tokens - 1) * token_stride + (heads - 1) * head_stride + dim);
  }
  size_t at(int64_t t, int h, int d) const { return static_cast<size_t>(t * token_stride + h * head_stride + d); }
  TensorView view(void* data) const { return {data, token_stride, head_stride}; }
};

inline Layout make_layout(int64_t tokens, int heads, int dim, LayoutKind kind) {
  switch (kind) {
    case LayoutKind::kPacked:
      return {heads, dim, int64_t{heads} * dim, dim, tokens};
    case LayoutKind::kPadded:
      return {heads, dim, int64_t{heads} * (dim + 8) + 16, dim + 8, tokens};
    case LayoutKind::kHeadMajor:
      return {heads, dim, dim, std::max<int64_t>(tokens, 1) * dim, tokens};
  }
  return {};
}

}  // namespace blockattn::testing
