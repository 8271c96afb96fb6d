// Hopper (sm_90) staging primitives for the warp-specialised kernels: shared-memory mbarriers
// (arrival counts plus transaction bytes), bulk copies that complete on them, named barriers for
// one role's threads, and setmaxnreg to move registers from the producer warpgroup to the
// consumers.
#pragma once
#include "prelude/megamoe_prelude.cuh"

#if !MEGAMOE_CUDA
#error "mbarriers and bulk copies are NVIDIA Hopper only"
#endif

namespace megamoe {

MM_DEVICE u32 sm_addr(const void* p) { return u32(__cvta_generic_to_shared(p)); }

MM_DEVICE void mbar_init(u64* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sm_addr(bar)), "r"(count) : "memory");
}
// Makes initialised barriers visible to the async proxy (the bulk-copy engine).
MM_DEVICE void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

MM_DEVICE void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sm_addr(bar)) : "memory");
}
// One arrival that also announces `bytes` still to land by bulk copies.
MM_DEVICE void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm_addr(bar)), "r"(bytes) : "memory");
}
// Waits until the phase of parity `parity` has completed.
MM_DEVICE void mbar_wait(u64* bar, u32 parity) {
  const u32 a = sm_addr(bar);
  u32 done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!done);
}

// Global -> shared, `bytes` (a multiple of 16, both ends 16-byte aligned), completing on `bar`.
MM_DEVICE void bulk_copy_g2s(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   sm_addr(dst)),
               "l"(src), "r"(bytes), "r"(sm_addr(bar))
               : "memory");
}

// A barrier among `threads` threads (whole warps) using hardware barrier `id` (0 is __syncthreads).
MM_DEVICE void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <int kRegs>
MM_DEVICE void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
MM_DEVICE void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace megamoe
