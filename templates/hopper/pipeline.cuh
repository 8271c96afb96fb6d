// Hopper (sm_90) staging primitives for the warp-specialised kernels: shared-memory mbarriers
// (arrival counts plus transaction bytes), bulk copies that complete on them, a block's reach
// into its cluster peers' shared memory, named barriers for one role's threads, and setmaxnreg to
// move registers from the producer warpgroup to the consumers.
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
// One try of a parity wait; sem: the ordering it acquires ("" is the block's scope).
#define MM_MBAR_TRY_WAIT(sem) \
  "{\n.reg .pred p;\nmbarrier.try_wait.parity" sem ".shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
// Waits until the phase of parity `parity` has completed; kClusterScope: the arrivals came from a
// cluster peer (peer_arrive), whose released writes the wait then acquires.
template <bool kClusterScope = false>
MM_DEVICE void mbar_wait(u64* bar, u32 parity) {
  const u32 a = sm_addr(bar);
  u32 done = 0;
  do {
    if constexpr (kClusterScope)
      asm volatile(MM_MBAR_TRY_WAIT(".acquire.cluster") : "=r"(done) : "r"(a), "r"(parity) : "memory");
    else
      asm volatile(MM_MBAR_TRY_WAIT("") : "=r"(done) : "r"(a), "r"(parity) : "memory");
  } while (!done);
}

// Global -> shared, `bytes` (a multiple of 16, both ends 16-byte aligned), completing on `bar`.
MM_DEVICE void bulk_copy_g2s(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   sm_addr(dst)),
               "l"(src), "r"(bytes), "r"(sm_addr(bar))
               : "memory");
}

// Clusters (a kernel rendered with __cluster_dims__): a block reaches its peers' shared memory
// through shared::cluster addresses.
MM_DEVICE int cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return int(r);
}
// Every thread of every block of the cluster: what each wrote before is seen by all after.
MM_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The shared::cluster address of `p` (a shared-memory object of this block) in block `rank`.
MM_DEVICE u32 peer_addr(const void* p, int rank) {
  u32 a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(sm_addr(p)), "r"(rank));
  return a;
}
MM_DEVICE void peer_store(u32 addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}
// One arrival on a peer's barrier, releasing this thread's earlier writes (peer_store) to the
// threads that wait for it with mbar_wait<true>.
MM_DEVICE void peer_arrive(u32 bar_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar_addr) : "memory");
}
// A barrier among `threads` threads (whole warps) using hardware barrier `id` (0 is __syncthreads).
MM_DEVICE void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// An arrival on hardware barrier `id` without waiting (the waiters use named_barrier).
MM_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
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
