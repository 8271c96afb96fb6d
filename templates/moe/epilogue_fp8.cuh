// The epilogue the stage kernels share: an fp32 tile in shared memory to fp8 blocks with e8m0
// scales (Stage1's h on the portable and tensor-core paths, every path's fp8 combine wire).
#pragma once
#include "common/numerics.cuh"
#include "interface/kernel_constants.cuh"

namespace megamoe {

// Where a stage's output rows go: row r's values at values + r * row_bytes, its e8m0 scales (fp8
// rows) at scales + r * scale_row_bytes. (Over several ranks a Stage2 row goes to its home
// rank's wire instead: ep/stage2_sinks.cuh.)
struct DenseRows {
  u8* values;
  i64 row_bytes;
  u8* scales;
  i64 scale_row_bytes;
  MM_DEVICE u8* row(int r) const { return values + (i64)r * row_bytes; }
  MM_DEVICE u8* scale_row(int r) const { return scales + (i64)r * scale_row_bytes; }
};

// The combine wire of one rank as rows: bf16 (kWire kWireBf16) or e4m3 with e8m0 scales per 32.
template <int kWire>
MM_DEVICE DenseRows wire_rows(void* wire, u8* scales, int model_dim) {
  return DenseRows{static_cast<u8*>(wire), kWire == kWireBf16 ? 2 * model_dim : model_dim, scales, model_dim / 32};
}

// Quantizes rows of an fp32 tile in shared memory (row r at tile + r * ld_tile, COLS values) to
// fp8 blocks of BLOCK values: row r goes to rows.row(out_row[r]) from column col0 (skipped when
// out_row[r] < 0), its scales to rows.scale_row(out_row[r]) from col0 / BLOCK. Thread tid of
// kThreads.
template <int ROWS, int COLS, int BLOCK, int kThreads, class Rows>
MM_DEVICE void store_tile_fp8(const float* tile, int ld_tile, const int* out_row, const Rows& rows, int col0, int tid) {
  for (int task = tid; task < ROWS * (COLS / BLOCK); task += kThreads) {
    const int r = task / (COLS / BLOCK), blk = task % (COLS / BLOCK);
    if (out_row[r] < 0) continue;
    const float* v = tile + r * ld_tile + blk * BLOCK;
    float amax = 0.f;
    for (int c = 0; c < BLOCK; ++c) amax = fmaxf(amax, fabsf(v[c]));
    const int e = mm_fp8_block_exponent(amax);
    const float inv = mm_pow2(-e);
    rows.scale_row(out_row[r])[col0 / BLOCK + blk] = u8(e + 127);
    u32* dst = reinterpret_cast<u32*>(rows.row(out_row[r]) + col0 + blk * BLOCK);
    for (int w = 0; w < BLOCK / 4; ++w) {
      const float s[4] = {v[w * 4] * inv, v[w * 4 + 1] * inv, v[w * 4 + 2] * inv, v[w * 4 + 3] * inv};
      dst[w] = mm_f32x4_to_e4m3(s);
    }
  }
}

}  // namespace megamoe
