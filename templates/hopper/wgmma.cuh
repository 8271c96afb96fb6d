// Hopper (sm_90a) warpgroup matrix ops: wgmma with fp8 e4m3 operands, A from registers (the
// converted weights), B from shared memory through a descriptor (activations, K-major rows of
// 128 bytes in the 128-byte swizzle), fp32 accumulators. The instruction itself, per token-tile
// width N, is in the generated hopper/wgmma_e4m3.cuh (inline PTX takes literal operand lists);
// acc[j][c] is the m16n8 accumulator layout per warp: rows g (c < 2) and g + 8, columns
// 8j + 2t + (c & 1).
#pragma once
#include "prelude/megamoe_prelude.cuh"
#include "hopper/wgmma_e4m3.cuh"

#if !MEGAMOE_CUDA
#error "wgmma is NVIDIA Hopper only"
#endif

namespace megamoe {

MM_DEVICE void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
MM_DEVICE void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
MM_DEVICE void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across an asynchronous wgmma.
template <int NT>
MM_DEVICE void wg_fence_acc(float (&acc)[NT][4]) {
  for (int j = 0; j < NT; ++j)
    for (int c = 0; c < 4; ++c) asm volatile("" : "+f"(acc[j][c])::"memory");
}

// Shared-memory descriptor of a K-major operand in the 128-byte swizzle: rows of 128 bytes, 8-row
// atoms 1024 bytes apart (stride byte offset), the leading byte offset unused by this mode.
MM_DEVICE u64 wg_desc_sw128(const void* smem) {
  const u32 addr = u32(__cvta_generic_to_shared(smem));
  return u64((addr & 0x3FFFF) >> 4) | (u64(1) << 16) | (u64(1024 >> 4) << 32) | (u64(1) << 62);
}

}  // namespace megamoe
