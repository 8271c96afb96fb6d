// Dispatch quantization: bf16 rows -> fp8 e4m3 in 1 x BLOCK blocks (BLOCK 32 or 64) with a
// power-of-two (e8m0) scale per block. One warp quantizes one block; blocks are spread grid-wide.
// Columns from x_cols on (the path's padding; x_cols is a multiple of 64) are zero.
#pragma once
#include "common/numerics.cuh"
#include "interface/kernel_args.cuh"

namespace megamoe {

template <int BLOCK>
MM_DEVICE void quantize_rows_fp8(const QuantizeRowsArgs& a) {
  const u16* x = a.x;
  u8 *q = a.q, *scales = a.scales;
  static_assert(BLOCK == 32 || BLOCK == 64, "blocks of 32 or 64 values");
  constexpr int kPerLane = BLOCK / 32;
  const int row_blocks = a.cols / BLOCK;
  const long long blocks = (long long)a.rows * row_blocks;
  const int lane = threadIdx.x & 31;
  const long long groups = (long long)gridDim.x * (kQuantizeThreads / 32);
  for (long long b = (long long)blockIdx.x * (kQuantizeThreads / 32) + threadIdx.x / 32; b < blocks; b += groups) {
    const long long row = b / row_blocks;
    const int col = int(b % row_blocks) * BLOCK;
    float v[kPerLane] = {}, amax = 0.f;
    if (col < a.x_cols)
      for (int i = 0; i < kPerLane; ++i)
        v[i] = mm_bf16_to_f32(x[row * a.x_cols + col + lane * kPerLane + i]), amax = fmaxf(amax, fabsf(v[i]));
    const int e = mm_fp8_block_exponent(mm_group32_absmax(amax));
    for (int i = 0; i < kPerLane; ++i) q[b * BLOCK + lane * kPerLane + i] = mm_f32_to_e4m3(v[i] * mm_pow2(-e));
    if (lane == 0) scales[b] = u8(e + 127);
  }
}

}  // namespace megamoe
