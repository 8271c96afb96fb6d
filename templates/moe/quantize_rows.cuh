// Dispatch quantization: bf16 rows -> fp8 e4m3 in 1x32 blocks with a power-of-two (e8m0)
// scale per block. Each group of 32 lanes quantizes one block; blocks are spread grid-wide.
#pragma once
#include "common/numerics.cuh"

namespace megamoe {

enum : int { kQuantizeThreads = 256 };

MM_DEVICE void quantize_rows_fp8(const u16* x, int rows, int cols, u8* q, u8* scales) {
  const long long blocks = (long long)rows * (cols / 32);
  const int lane = threadIdx.x & 31;
  const long long groups = (long long)gridDim.x * (kQuantizeThreads / 32);
  for (long long b = (long long)blockIdx.x * (kQuantizeThreads / 32) + threadIdx.x / 32; b < blocks; b += groups) {
    const float v = mm_bf16_to_f32(x[b * 32 + lane]);
    const int e = mm_fp8_block_exponent(mm_group32_absmax(v));
    q[b * 32 + lane] = mm_f32_to_e4m3(v * mm_pow2(-e));
    if (lane == 0) scales[b] = u8(e + 127);
  }
}

}  // namespace megamoe
