// The NVSHMEM device calls the nvshmem transport's kernels make, as plain extern "C" functions.
// NVRTC cannot include NVSHMEM's device headers, so the kernels declare these
// (templates/ep/shmem.cuh); nvcc compiles this file to LTO-IR at build time (CMakeLists.txt), and
// nvJitLink links it and NVSHMEM's device library into each such kernel at run time.
#include <nvshmem.h>
#include <nvshmemx.h>

// A warp's put of `bytes` from this rank's memory to `dest` (a symmetric address) on `pe`,
// returning before it completes; every lane of the warp calls it.
extern "C" __device__ void megamoe_shmem_put_warp(void* dest, const void* src, size_t bytes, int pe) {
  nvshmemx_putmem_nbi_warp(dest, src, bytes, pe);
}

// The same put, returning once `src` may be written again (not once it has landed).
extern "C" __device__ void megamoe_shmem_put_warp_blocking(void* dest, const void* src, size_t bytes, int pe) {
  nvshmemx_putmem_warp(dest, src, bytes, pe);
}

// A word on `pe` set to `value` (an atomic: what this thread put to `pe` before a fence lands
// first).
extern "C" __device__ void megamoe_shmem_set_u32(unsigned* dest, unsigned value, int pe) {
  nvshmem_uint32_atomic_set(dest, value, pe);
}

// Orders this thread's puts and sets to each rank: earlier ones land before later ones.
extern "C" __device__ void megamoe_shmem_fence() { nvshmem_fence(); }

// Waits until this thread's puts have completed at their destinations.
extern "C" __device__ void megamoe_shmem_quiet() { nvshmem_quiet(); }
