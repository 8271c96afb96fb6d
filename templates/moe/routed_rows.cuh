// The Hopper kernels' activations, one row per routed row p (dispatch writes x this way, Stage1
// writes h this way): fp8 in [K / 128 chunk][rows_pad][128 bytes] and f32 scales in
// [K / 128][rows_pad][4], an entry per 128 k (h's block is 128 k; x's block of up to 512 k has
// its scale repeated in each of its chunks' entries). Row p's 16-byte piece q is
// stored at piece q ^ (r % 8), r = p - first row of p's expert: every tile starts at a multiple of
// 16 rows into its expert, so a tile's chunk is one contiguous copy that lands in shared memory
// already in the 128-byte swizzle wgmma reads. The scales of the 16 rows of a pair of 8-row
// groups (r / 16) sit together in the pair's first 16 floats (its first 4 rows' entries), in the
// order a consumer thread reads them, four at a time (moe/hopper_pipeline.cuh's promote): thread t of
// a quad takes rows 2t, 2t + 1 of both groups. The 16-byte entries keep every tile's scales
// aligned for the bulk copies.
#pragma once
#include "common/numerics.cuh"

namespace megamoe {

MM_DEVICE i64 routed_row_offset(int chunk, int p, int rows_pad) { return ((i64)chunk * rows_pad + p) * 128; }
// Where row p's scale of chunk `chunk` goes, r16 = (p - first row of p's expert) % 16.
MM_DEVICE i64 routed_scale_index(int chunk, int p, int r16, int rows_pad) {
  const int at = 4 * ((r16 & 7) >> 1) + 2 * (r16 >> 3) + (r16 & 1);
  return ((i64)chunk * rows_pad + p - r16) * 4 + at;
}

// A lane's piece of a 128-value chunk in fp8: 16 values (one 16-byte piece of the row), the
// block's scale and its exponent (scale = 2^exponent).
struct RoutedPiece {
  uint4 bytes;
  float scale;
  int exponent;
};

// A lane's 16 values in fp8 with the block exponent e given (quantize_piece takes it from the
// block's maximum; one scale per row takes the row's first).
MM_DEVICE RoutedPiece quantize_piece_with(const float (&v)[16], int e) {
  const float inv = mm_pow2(-e);
  u32 w[4];
  for (int q = 0; q < 4; ++q) {
    const float s[4] = {v[4 * q] * inv, v[4 * q + 1] * inv, v[4 * q + 2] * inv, v[4 * q + 3] * inv};
    w[q] = mm_f32x4_to_e4m3(s);
  }
  return RoutedPiece{make_uint4(w[0], w[1], w[2], w[3]), mm_pow2(e), e};
}

// Quantizes the values of kLanes consecutive lanes (2 to 32: a block of 32 to 512 values, 16
// values a lane; in the routed layout lane l % 8 holds values 16 (l % 8) .. + 15 of its chunk)
// into one fp8 block. Every lane of the warp must call it.
template <int kLanes>
MM_DEVICE RoutedPiece quantize_piece(const float (&v)[16]) {
  static_assert(kLanes == 2 || kLanes == 4 || kLanes == 8 || kLanes == 16 || kLanes == 32,
                "a block of 32 to 512 values");
  float amax = 0.f;
  for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(v[i]));
  for (int m = kLanes / 2; m > 0; m /= 2) amax = fmaxf(amax, mm_shfl_xor(amax, m));
  return quantize_piece_with(v, mm_fp8_block_exponent(amax));
}

// The 16 bf16 values at src (two 16-byte loads) as floats.
MM_DEVICE void load_bf16x16(const u16* src, float (&v)[16]) {
  const uint4* q = reinterpret_cast<const uint4*>(src);
  const uint4 r0 = q[0], r1 = q[1];
  const u32 w[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
  for (int i = 0; i < 8; ++i) v[2 * i] = mm_bf16_to_f32(u16(w[i])), v[2 * i + 1] = mm_bf16_to_f32(u16(w[i] >> 16));
}

// The largest |x| of a row of n bf16 values (n a multiple of 16), by a warp (every lane gets it),
// 16 values a lane per step as the quantizing pass reads them.
MM_DEVICE float row_absmax_bf16(const u16* row, int n) {
  float m = 0.f;
  for (int c = (threadIdx.x % MEGAMOE_WARP_SIZE) * 16; c < n; c += MEGAMOE_WARP_SIZE * 16) {
    float v[16];
    load_bf16x16(row + c, v);
    for (int i = 0; i < 16; ++i) m = fmaxf(m, fabsf(v[i]));
  }
  for (int s = MEGAMOE_WARP_SIZE / 2; s > 0; s /= 2) m = fmaxf(m, mm_shfl_xor(m, s));
  return m;
}

// Stores piece `piece` (0..7) of chunk `chunk` of routed row p, r16 rows (mod 16) into its
// expert; the lane holding piece 0 stores the scale.
MM_DEVICE void store_routed_piece(const RoutedPiece& q, int piece, int chunk, int p, int r16, int rows_pad, u8* out,
                                  float* scales) {
  *reinterpret_cast<uint4*>(out + routed_row_offset(chunk, p, rows_pad) + ((piece ^ (r16 & 7)) << 4)) = q.bytes;
  if (piece == 0) scales[routed_scale_index(chunk, p, r16, rows_pad)] = q.scale;
}

// Stores half `half` (64 values) of chunk `chunk` of routed row p in fp8 with the chunk's block
// exponent e (mm_fp8_block_exponent of the amax over both halves), by a half warp: lane16 0..15
// holds values 4 lane16 .. 4 lane16 + 3 of the half. with_scale: this half warp also stores the
// chunk's scale (one of the two halves' writers does).
MM_DEVICE void store_routed_half(const float (&v)[4], int lane16, int half, int chunk, int p, int r16, int rows_pad,
                                 int e, bool with_scale, u8* q, float* scales) {
  const float inv = mm_pow2(-e);
  const float s[4] = {v[0] * inv, v[1] * inv, v[2] * inv, v[3] * inv};
  const u32 word = mm_f32x4_to_e4m3(s);
  const int piece = half * 4 + (lane16 >> 2);
  *reinterpret_cast<u32*>(q + routed_row_offset(chunk, p, rows_pad) + ((piece ^ (r16 & 7)) << 4) + (lane16 & 3) * 4) =
      word;
  if (with_scale && lane16 == 0) scales[routed_scale_index(chunk, p, r16, rows_pad)] = mm_pow2(e);
}

}  // namespace megamoe
