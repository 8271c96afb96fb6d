// The nvshmem transport's reach to ranks of other nodes (docs/ep.md, "Over nodes: NVSHMEM"): a
// rank whose region this one cannot load and store (EpArgs::peers[r] null) gets puts from this
// rank's staging areas, to the same offsets of its region, through NVSHMEM. Kernels compiled for
// the nvshmem transport (MEGAMOE_NVSHMEM) call the device shim (src/backend/cuda/nvshmem_shim.cu),
// linked in with NVSHMEM's device library; every other build has no remote rank.
#pragma once
#include "interface/kernel_args.cuh"
#include "prelude/megamoe_prelude.cuh"

#if MEGAMOE_NVSHMEM
extern "C" __device__ void megamoe_shmem_put_warp(void* dest, const void* src, unsigned long bytes, int pe);
extern "C" __device__ void megamoe_shmem_put_warp_blocking(void* dest, const void* src, unsigned long bytes, int pe);
extern "C" __device__ void megamoe_shmem_set_u32(unsigned* dest, unsigned value, int pe);
extern "C" __device__ void megamoe_shmem_fence();
extern "C" __device__ void megamoe_shmem_quiet();
#endif

namespace megamoe {

// Whether rank r is reached by puts (another node) rather than by load and store.
MM_DEVICE bool ep_remote(const EpArgs& ep, int r) {
#if MEGAMOE_NVSHMEM
  return ep.peers[r] == nullptr;
#else
  (void)ep, (void)r;
  return false;
#endif
}

// `offset` in this rank's own region: the symmetric address a put to any rank names, and where
// this rank stages what it puts.
template <class T>
MM_DEVICE T* ep_own(const EpArgs& ep, u64 offset) {
  return reinterpret_cast<T*>(ep.peers[ep.rank] + offset);
}

// A warp's put of `bytes` from `src` (in this rank's region) to `offset` of rank r's region;
// every lane calls it, after the lanes' stores to src (which it orders before the put). It
// returns before the put completes, or (blocking) once `src` may be written again.
MM_DEVICE void ep_put_warp(const EpArgs& ep, int r, u64 offset, const void* src, u64 bytes, bool blocking = false) {
#if MEGAMOE_NVSHMEM
  mm_fence_system();
  mm_syncwarp();
  if (blocking) megamoe_shmem_put_warp_blocking(ep_own<u8>(ep, offset), src, bytes, r);
  else megamoe_shmem_put_warp(ep_own<u8>(ep, offset), src, bytes, r);
#else
  (void)ep, (void)r, (void)offset, (void)src, (void)bytes, (void)blocking;
#endif
}

// Waits until the calling thread's puts have landed at their ranks (before a block counts itself
// done, so that the last block's flag comes after every block's rows).
MM_DEVICE void ep_quiet(const EpArgs& ep) {
#if MEGAMOE_NVSHMEM
  if (ep.remote) megamoe_shmem_quiet();
#else
  (void)ep;
#endif
}

// Flag word `index` at `flag_at` of rank r set to `value` after what this rank made visible
// before (a release): a store for a rank in reach, a fenced NVSHMEM set for a rank of another node.
MM_DEVICE void ep_set_flag(const EpArgs& ep, int r, u64 flag_at, int index, u32 value) {
#if MEGAMOE_NVSHMEM
  if (ep_remote(ep, r)) {
    megamoe_shmem_fence();
    megamoe_shmem_set_u32(ep_own<u32>(ep, flag_at) + index, value, r);
    return;
  }
#endif
  mm_store_release_system(reinterpret_cast<u32*>(ep.peers[r] + flag_at) + index, value);
}

}  // namespace megamoe
