// The device prelude: the few things that differ between CUDA (NVRTC) and HIP (hipRTC), so
// that every kernel template is written once. Templates include no system headers: what
// they need is here, and so every byte a kernel is built from is part of its cache key.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIP__)
#define MEGAMOE_HIP 1
#define MEGAMOE_WARP_SIZE 64  // CDNA wavefront
#else
#define MEGAMOE_CUDA 1
#define MEGAMOE_WARP_SIZE 32
#endif

#define MM_DEVICE __device__ __forceinline__

#include "interface/scalar_types.cuh"

namespace megamoe {

// Butterfly exchange within a warp (wavefront on AMD).
MM_DEVICE float mm_shfl_xor(float v, int lane_mask) {
#if MEGAMOE_CUDA
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

// Lane l gets v of lane l - delta (its own v where l < delta).
MM_DEVICE int mm_shfl_up(int v, int delta) {
#if MEGAMOE_CUDA
  return __shfl_up_sync(0xffffffffu, v, delta);
#else
  return __shfl_up(v, delta);
#endif
}

// Sum over the warp; every lane gets the result.
MM_DEVICE float mm_warp_sum(float v) {
  for (int m = MEGAMOE_WARP_SIZE / 2; m > 0; m /= 2) v += mm_shfl_xor(v, m);
  return v;
}

// Lane l gets v of lane `src` (a warp-wide broadcast when src is the same on every lane).
MM_DEVICE int mm_shfl(int v, int src) {
#if MEGAMOE_CUDA
  return __shfl_sync(0xffffffffu, v, src);
#else
  return __shfl(v, src);
#endif
}
// Bit l set where lane l's predicate holds.
MM_DEVICE u64 mm_ballot(bool p) {
#if MEGAMOE_CUDA
  return __ballot_sync(0xffffffffu, p);
#else
  return __ballot(p);
#endif
}
MM_DEVICE void mm_syncwarp() {
#if MEGAMOE_CUDA
  __syncwarp();
#endif
}

// Fences: the device's, and the system's (what peer GPUs and the host see).
MM_DEVICE void mm_fence_system() { __threadfence_system(); }
MM_DEVICE void mm_fence_device() { __threadfence(); }

// Flags between GPUs and between blocks: a load that acquires what the writer released before
// its store, at system scope (a peer GPU writes) or device scope (another block writes).
MM_DEVICE u32 mm_load_acquire_system(const u32* p) {
#if MEGAMOE_CUDA
  u32 v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}
MM_DEVICE int mm_load_acquire_device(const int* p) {
#if MEGAMOE_CUDA
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
#endif
}
MM_DEVICE void mm_store_release_system(u32* p, u32 v) {
#if MEGAMOE_CUDA
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}
// Orders this thread's bulk copies (the async proxy, sm_90) after what it has acquired of other
// threads' ordinary stores; elsewhere nothing to do.
MM_DEVICE void mm_fence_proxy_async() {
#if MEGAMOE_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}

// A relaxed load that is not cached across iterations (a counter another block changes).
MM_DEVICE u32 mm_load_volatile(const u32* p) { return *static_cast<const volatile u32*>(p); }

// Nanoseconds of a clock that runs at the same rate on every SM (a wait's deadline).
MM_DEVICE u64 mm_clock_ns() {
#if MEGAMOE_CUDA
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return wall_clock64() * 10;  // a 100 MHz counter on CDNA
#endif
}
MM_DEVICE void mm_pause() {
#if MEGAMOE_CUDA
  __nanosleep(64);
#else
  __builtin_amdgcn_s_sleep(1);
#endif
}

// fp8 e4m3 values travel as bytes; the conversions live with the kernels that use them.
typedef u8 fp8_e4m3_storage;

// The special function unit's 2^x and 1/x (ex2.approx, rcp.approx: within 2 ulp and 1 ulp;
// subnormal results flush to zero). The activations are built on them (common/activation.cuh).
MM_DEVICE float mm_exp2_approx(float x) {
#if MEGAMOE_CUDA
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}
MM_DEVICE float mm_rcp_approx(float x) {
#if MEGAMOE_CUDA
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return 1.f / x;
#endif
}

// Programmatic dependent launch (sm_90+; Device::launch's early_start). A kernel launched early
// waits here for the stream's previous kernel to finish, its writes visible, before it touches
// what that kernel reads or writes; elsewhere (and for an ordinary launch) it returns at once.
// mm_release_dependents lets the stream's next kernel be scheduled once every block of this one
// has called it or exited; the kernels call it only after their wait, so that when a kernel
// starts, every kernel before the one in front of it has finished.
MM_DEVICE void mm_wait_prior_grid() {
#if MEGAMOE_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
MM_DEVICE void mm_release_dependents() {
#if MEGAMOE_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace megamoe
