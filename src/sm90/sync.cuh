// Hopper synchronization vocabulary: mbarriers and async-proxy fences through
// libcu++ (cuda::ptx), plus what it lacks (named barriers, setmaxnreg) as
// inline PTX. Device code here needs sm_90.
#pragma once

#include <cstdint>

#include <cuda/ptx>

namespace blockattn::sm90 {

namespace ptx = cuda::ptx;

// A shared-memory mbarrier used as a phase-tracking pipeline slot.
struct Barrier {
  uint64_t word;

  __device__ void init(uint32_t arrivals) { ptx::mbarrier_init(&word, arrivals); }
  // Producer: one arrival that also announces `bytes` of incoming TMA data.
  __device__ void arrive_expect_tx(uint32_t bytes) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &word, bytes);
  }
  __device__ void arrive() { ptx::mbarrier_arrive(&word); }
  // Blocks until the phase with this parity has completed.
  __device__ void wait(uint32_t parity) {
    while (!ptx::mbarrier_try_wait_parity(&word, parity)) {
    }
  }
};

// Item i of a ring of kStages stages: its stage, and the parities to wait on.
// A fresh mbarrier counts as having completed the phase before phase 0, so
// the producer's first round through the ring does not wait.
template <int kStages>
struct RingSlot {
  int stage;
  uint32_t phase;

  __device__ static RingSlot of(int item) { return {item % kStages, static_cast<uint32_t>((item / kStages) & 1)}; }
  __device__ uint32_t full_parity() const { return phase; }       // consumer waits for the data
  __device__ uint32_t empty_parity() const { return phase ^ 1; }  // producer waits for the release
};

// A reader's wait for the `use`-th fill of a slot that its readers take in
// turn (the staged rotary rows of sm90/forward_kernel.cuh and
// sm90/backward_kernel.cuh): the slot's previous use's release first, then
// the fill. The release wait is what keeps `full` within one phase of the
// fill waited for, given that the use before that one has been released
// too. With two readers in turn that is the reader's own earlier use; with
// three it may be another reader's, still pending, and the `empty` wait
// could take the phase of use - 3 for use - 1's (the kernels assert two).
__device__ __forceinline__ void wait_for_fill_in_turn(Barrier& full, Barrier& empty, uint32_t use) {
  if (use > 0) empty.wait((use - 1) & 1u);
  full.wait(use & 1u);
}

// Makes mbarrier initialization visible to the async proxy (TMA).
__device__ __forceinline__ void fence_barrier_init() { ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster); }

// Orders this thread's generic-proxy shared-memory writes before later
// async-proxy (TMA, wgmma) accesses of the same memory.
__device__ __forceinline__ void fence_async_shared() { ptx::fence_proxy_async(ptx::space_shared); }

// Barrier among `threads` threads (a multiple of 32) using hardware barrier `id`
// (0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The named barrier of all of a kernel's consumer warpgroups, where they meet
// (the backwards', the grouped forward's).
constexpr uint32_t kConsumersBarrier = 1;

// named_barrier_sync that also returns whether any of the `threads` threads
// passed true: a warpgroup-wide choice for the price of the barrier.
__device__ __forceinline__ bool named_barrier_sync_any(uint32_t id, uint32_t threads, bool value) {
  uint32_t any;
  asm volatile(
      "{\n"
      "  .reg .pred in, out;\n"
      "  setp.ne.u32 in, %1, 0;\n"
      "  bar.red.or.pred out, %2, %3, in;\n"
      "  selp.u32 %0, 1, 0, out;\n"
      "}\n"
      : "=r"(any)
      : "r"(static_cast<uint32_t>(value)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

// Arrives at hardware barrier `id` without waiting (the other side of a
// named_barrier_sync among `threads` threads).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Consumer warpgroups taking turns to issue their tensor-core work, round
// robin (named barrier kFirstBarrier + c belongs to consumer c): while one
// warpgroup's products run, the others compute their softmax, so the
// exponentials of one hide under the matrix work of another instead of every
// warpgroup's softmax landing on the same cycles. Each round is bracketed by
// wait_turn() / pass_turn(); all warpgroups must run the same number of
// rounds (empty ones where a warpgroup has nothing to issue), so that the
// arrivals pair up.
template <int kConsumers, uint32_t kFirstBarrier = 1>
struct TakeTurns {
  int self;  // this warpgroup's consumer index

  __device__ void start() const {  // consumer 0 goes first: the last one hands it the first turn
    if (self == kConsumers - 1) named_barrier_arrive(kFirstBarrier, 256);
  }
  __device__ void wait_turn() const { named_barrier_sync(kFirstBarrier + self, 256); }
  __device__ void pass_turn() const { named_barrier_arrive(kFirstBarrier + (self + 1) % kConsumers, 256); }
  __device__ void finish() const {  // consumes the last consumer's final pass: no arrival is left pending
    if (self == 0) named_barrier_sync(kFirstBarrier, 256);
  }
};

// Register budget per thread of the calling warpgroup (sm_90a).
template <uint32_t kRegs>
__device__ __forceinline__ void set_max_registers_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void set_max_registers_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace blockattn::sm90
