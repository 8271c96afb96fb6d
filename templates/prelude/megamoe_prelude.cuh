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

// Fences and atomics visible to peer GPUs and the host (system scope).
MM_DEVICE void mm_fence_system() { __threadfence_system(); }
MM_DEVICE void mm_fence_device() { __threadfence(); }
MM_DEVICE int mm_atomic_add_system(int* p, int v) { return atomicAdd_system(p, v); }
MM_DEVICE int mm_atomic_max_device(int* p, int v) { return atomicMax(p, v); }

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
