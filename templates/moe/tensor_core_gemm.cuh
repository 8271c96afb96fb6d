// The tensor-core main loop of both expert GEMMs (NVIDIA sm_89 and later: fp8 mma.sync), in the
// swapped orientation: the weights are the mma's A (M = weight rows, 16 per warp, 128 per block
// of 8 warps), the routed rows (tokens) its B (N = BM, the token tile). Weights (layout v3,
// src/weights/tensor_core_layout.hpp) and activations (fp8, one e8m0 scale per 64 k) are staged
// in shared memory by cp.async, kStages chunks of 128 k deep; a lane then reads its weights as
// two 16-byte words and turns 8 values into e4m3 with two byte permutes, the block exponent
// folded in. The mma partial sums of each 64 k are scaled by the activation block scales and
// added to the accumulators (the weights' row scales are left to the epilogue).
#pragma once
#include "common/e2m1_to_e4m3.cuh"
#include "common/numerics.cuh"
#include "interface/kernel_constants.cuh"

#if !MEGAMOE_CUDA
#error "the tensor-core kernels are NVIDIA-only (fp8 mma.sync); the hip backend runs the portable path"
#endif

namespace megamoe {

MM_DEVICE void mm_mma_e4m3(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

MM_DEVICE void mm_cp_async16(void* smem, const void* gmem, bool valid) {
  const u32 s = u32(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
MM_DEVICE void mm_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
MM_DEVICE void mm_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int BM, int kStages>
struct TensorCoreGemm {
  static constexpr int kWarps = 8, kThreads = kTensorCoreThreads, kRows = kWeightRowsPerBlock;
  static constexpr int kRowBytes = kTensorCoreRowBytes;
  static constexpr int NT = BM / 8;                               // n8 tiles
  static_assert(BM % 8 == 0 && BM <= 128, "BM: a multiple of 8 up to 128");

  // One pipeline stage (128 k): the activations [BM][kRowBytes], then each warp's weight words
  // (1 KB) and exponents (64 B). After kStages stages: the tile's activation scales as floats
  // [BM][K / 64] (interface/kernel_constants.cuh: tensor_core_smem_bytes).
  static constexpr int kActBytes = BM * kRowBytes;
  static constexpr int kStageBytes = tensor_core_stage_bytes(BM);
  static_assert(kStageBytes == kActBytes + kLayoutV3UnitBytes, "the activations, then the unit");

  // rows[n] (shared): the activation row of token column n, or -1. acc[j][0..3]: this warp's
  // weight rows g and g + 8 against token columns 8j + 2t and 8j + 2t + 1.
  MM_DEVICE static void run(u8* smem, const u8* a_q, const u8* a_scales, const int* rows, int K, const u8* units,
                            int slab0, float (&acc)[NT][4]) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int chunks = K / 128, kb64 = K / 64;
    float* scale_smem = reinterpret_cast<float*>(smem + kStages * kStageBytes);
    for (int i = tid; i < BM * kb64; i += kThreads) {
      const int n = i / kb64, row = rows[n];
      scale_smem[i] = row >= 0 ? mm_e8m0_to_f32(a_scales[(i64)row * kb64 + i % kb64]) : 0.f;
    }
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;

    // Layout v3 keeps a block's 8 slabs together per chunk: 8 KB of words, then 512 B of exponents.
    auto load_stage = [&](int chunk) {
      u8* st = smem + (chunk % kStages) * kStageBytes;
      const u8* unit = layout_v3_unit(units, slab0 / 8, chunk, chunks);
      for (int i = tid; i < BM * 8; i += kThreads) {
        const int n = i >> 3, part = i & 7, row = rows[n];
        mm_cp_async16(st + n * kRowBytes + part * 16, a_q + (row >= 0 ? (i64)row * K + chunk * 128 + part * 16 : 0),
                      row >= 0);
      }
      for (int i = tid; i < kWarps * 64; i += kThreads) {  // words: 64 x 16 B per slab
        const int w = i >> 6, part = i & 63;
        mm_cp_async16(st + kActBytes + w * 1024 + part * 16,
                      unit + w * 1024 + part * 16, true);
      }
      for (int i = tid; i < kWarps * 4; i += kThreads) {  // exponents: 4 x 16 B per slab
        const int w = i >> 2, part = i & 3;
        mm_cp_async16(st + kActBytes + kWarps * 1024 + w * 64 + part * 16,
                      unit + kWarps * 1024 + w * 64 + part * 16, true);
      }
    };

    for (int s = 0; s < kStages - 1; ++s) {
      if (s < chunks) load_stage(s);
      mm_cp_async_commit();
    }
    __syncthreads();  // scale_smem
    for (int chunk = 0; chunk < chunks; ++chunk) {
      mm_cp_async_wait<kStages - 2>();
      __syncthreads();
      if (chunk + kStages - 1 < chunks) load_stage(chunk + kStages - 1);
      mm_cp_async_commit();
      const u8* st = smem + (chunk % kStages) * kStageBytes;
      const uint4* wq = reinterpret_cast<const uint4*>(st + kActBytes + warp * 1024 + lane * 32);
      const uint4 w_lo = wq[0], w_hi = wq[1];
      const u32* eq = reinterpret_cast<const u32*>(st + kActBytes + kWarps * 1024 + warp * 64);
      const u32 e_lo = eq[g], e_hi = eq[g + 8];
      for (int half64 = 0; half64 < 2; ++half64) {
        float part[NT][4];
        for (int j = 0; j < NT; ++j)
          for (int c = 0; c < 4; ++c) part[j][c] = 0.f;
        for (int kb2 = 0; kb2 < 2; ++kb2) {
          const int kb = half64 * 2 + kb2;
          u32 a[4];
          const u32 w0 = kb == 0 ? w_lo.x : kb == 1 ? w_lo.y : kb == 2 ? w_lo.z : w_lo.w;
          const u32 w1 = kb == 0 ? w_hi.x : kb == 1 ? w_hi.y : kb == 2 ? w_hi.z : w_hi.w;
          mm_e2m1x8_to_e4m3(w0, mm_signed_byte(e_lo, kb), a[0], a[2]);
          mm_e2m1x8_to_e4m3(w1, mm_signed_byte(e_hi, kb), a[1], a[3]);
          for (int j = 0; j < NT; ++j) {
            const u8* b = st + (8 * j + g) * kRowBytes + kb * 32 + 4 * t;
            mm_mma_e4m3(part[j], a, *reinterpret_cast<const u32*>(b), *reinterpret_cast<const u32*>(b + 16));
          }
        }
        const int block = chunk * 2 + half64;
        for (int j = 0; j < NT; ++j) {
          const float s0 = scale_smem[(8 * j + 2 * t) * kb64 + block];
          const float s1 = scale_smem[(8 * j + 2 * t + 1) * kb64 + block];
          acc[j][0] += part[j][0] * s0, acc[j][1] += part[j][1] * s1;
          acc[j][2] += part[j][2] * s0, acc[j][3] += part[j][3] * s1;
        }
      }
    }
    mm_cp_async_wait<0>();
    __syncthreads();  // shared memory is free for the epilogue
  }
};

}  // namespace megamoe
