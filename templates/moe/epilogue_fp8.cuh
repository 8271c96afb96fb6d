// The epilogue the stage kernels share: an fp32 tile in shared memory to fp8 blocks with e8m0
// scales (Stage1's h on the portable and tensor-core paths, every path's fp8 combine wire).
#pragma once
#include "common/numerics.cuh"

namespace megamoe {

// Quantizes rows of an fp32 tile in shared memory (row r at tile + r * ld_tile, COLS values) to
// fp8 blocks of BLOCK values: row r goes to out + out_row[r] * ld from column col0 (skipped when
// out_row[r] < 0), its scales to scales + out_row[r] * ld_scales + col0 / BLOCK. Thread tid of kThreads.
template <int ROWS, int COLS, int BLOCK, int kThreads>
MM_DEVICE void store_tile_fp8(const float* tile, int ld_tile, const int* out_row, u8* out, int ld, u8* scales,
                              int ld_scales, int col0, int tid) {
  for (int task = tid; task < ROWS * (COLS / BLOCK); task += kThreads) {
    const int r = task / (COLS / BLOCK), blk = task % (COLS / BLOCK);
    if (out_row[r] < 0) continue;
    const float* v = tile + r * ld_tile + blk * BLOCK;
    float amax = 0.f;
    for (int c = 0; c < BLOCK; ++c) amax = fmaxf(amax, fabsf(v[c]));
    const int e = mm_fp8_block_exponent(amax);
    const float inv = mm_pow2(-e);
    scales[(i64)out_row[r] * ld_scales + col0 / BLOCK + blk] = u8(e + 127);
    u32* dst = reinterpret_cast<u32*>(out + (i64)out_row[r] * ld + col0 + blk * BLOCK);
    for (int w = 0; w < BLOCK / 4; ++w) {
      const float s[4] = {v[w * 4] * inv, v[w * 4 + 1] * inv, v[w * 4 + 2] * inv, v[w * 4 + 3] * inv};
      dst[w] = mm_f32x4_to_e4m3(s);
    }
  }
}

}  // namespace megamoe
