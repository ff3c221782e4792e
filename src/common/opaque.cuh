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

}  // namespace blockattn
