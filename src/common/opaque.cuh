// A value the compiler cannot see through, to keep loop-invariant address
// arithmetic inside a loop: recomputing a few shared-memory offsets per
// iteration is cheap, while dozens hoisted out of the loop would each hold a
// register for the whole kernel and cause spills.
#pragma once

namespace blockattn {

__device__ __forceinline__ int opaque(int x) {
  int y;
  asm volatile("mov.b32 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// This thread's index in a group of kCount threads (a power of two) that
// starts at thread `first`, re-read through opaque(). The mask is one AND, and
// it tells the compiler the index is in [0, kCount): tid % 32, tid / 32 and
// every layout offset derived from them then compile to masks and shifts.
// From a plain int they are signed divisions, each with its fix-up sequence
// (docs/perf.md, "Signed division in the consumers' address arithmetic").
// The sm90 backward kernels take it; the sm80 kernels measured slower with it
// (their backward at D = 64, 3 points on an H200) and keep opaque() alone.
template <int kCount>
__device__ __forceinline__ int opaque_thread_index(int first = 0) {
  static_assert(kCount > 0 && (kCount & (kCount - 1)) == 0, "a power of two");
  return (opaque(static_cast<int>(threadIdx.x)) - first) & (kCount - 1);
}

}  // namespace blockattn
