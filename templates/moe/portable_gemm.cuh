// The portable (any GPU, CUDA cores) main loop of both expert GEMMs: C[BM x BW] (NB times, one
// per B operand) = A_rows (fp8 e4m3, 1x32 scales) x B^T (MXFP4, 1x32 e8m0 scales), fp32
// accumulation, K walked in steps of one 32-value scale block. 256 threads as 16 x 16; a thread
// owns rows ty + 16 i and columns tx + 16 j of the tile.
#pragma once
#include "common/numerics.cuh"

namespace megamoe {

template <int BM, int BW, int NB>
struct PortableGemm {
  static constexpr int kThreads = 256;
  static constexpr int TM = BM / 16, TN = BW / 16;
  static_assert(BM % 16 == 0 && BW % 16 == 0 && BM <= 64 && BW <= 64, "portable tile: BM, BW in {16,...,64}");

  struct Smem {
    float a[32][BM];
    float b[NB][32][BW];
  };

  // rows[i]: the row of A for tile row i, or -1 (its result is then unused).
  // B operand nb of column c is row b_row0 + nb * b_operand_stride + c of B.
  MM_DEVICE static void run(Smem& s, const u8* a_q, const u8* a_scales, const int* rows, int K, const u8* b_packed,
                            const u8* b_scales, int b_row0, int b_operand_stride, float (&acc)[NB][TM][TN]) {
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int kblocks = K / 32;
    for (int n = 0; n < NB; ++n)
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[n][i][j] = 0.f;

    for (int kb = 0; kb < kblocks; ++kb) {
      for (int t = tid; t < BM * 8; t += kThreads) {  // A: 4 bytes per thread
        const int r = t >> 3, part = t & 7, row = rows[r];
        if (row >= 0) {
          const u32 word = *reinterpret_cast<const u32*>(a_q + (i64)row * K + kb * 32 + part * 4);
          const float scale = mm_e8m0_to_f32(a_scales[(i64)row * kblocks + kb]);
          for (int j = 0; j < 4; ++j) s.a[part * 4 + j][r] = mm_e4m3_to_f32(u8(word >> (8 * j))) * scale;
        } else {
          for (int j = 0; j < 4; ++j) s.a[part * 4 + j][r] = 0.f;
        }
      }
      for (int t = tid; t < NB * BW; t += kThreads) {  // B: one 32-value block (16 bytes) per thread
        const int n = t / BW, c = t % BW;
        const i64 brow = b_row0 + (i64)n * b_operand_stride + c;
        const u32* p = reinterpret_cast<const u32*>(b_packed + brow * (K / 2) + kb * 16);
        const float scale = mm_e8m0_to_f32(b_scales[brow * kblocks + kb]);
        for (int w = 0; w < 4; ++w) {
          const u32 word = p[w];
          for (int j = 0; j < 8; ++j) s.b[n][w * 8 + j][c] = mm_e2m1_to_f32(word >> (4 * j)) * scale;
        }
      }
      __syncthreads();
      for (int k = 0; k < 32; ++k) {
        float a[TM];
        for (int i = 0; i < TM; ++i) a[i] = s.a[k][ty + 16 * i];
        for (int n = 0; n < NB; ++n)
          for (int j = 0; j < TN; ++j) {
            const float b = s.b[n][k][tx + 16 * j];
            for (int i = 0; i < TM; ++i) acc[n][i][j] += a[i] * b;
          }
      }
      __syncthreads();
    }
  }
};

}  // namespace megamoe
