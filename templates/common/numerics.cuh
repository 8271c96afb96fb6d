// Number formats on the device: bf16, e8m0 scales, e2m1 (MXFP4) and e4m3 (fp8) values, and the
// power-of-two scale of an fp8 1x32 block. Bit-for-bit the same rules as the host side
// (src/formats/formats.cpp, docs/formats.md).
#pragma once
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

MM_DEVICE float mm_bf16_to_f32(u16 b) { return __uint_as_float(u32(b) << 16); }

MM_DEVICE u16 mm_f32_to_bf16(float v) {  // round to nearest even; NaN stays NaN
  u32 u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return u16((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return u16(u >> 16);
}

// 2^e for e in [-127, 127], exactly (2^-127 is a float subnormal).
MM_DEVICE float mm_pow2(int e) { return e >= -126 ? __uint_as_float(u32(e + 127) << 23) : __uint_as_float(0x00400000u); }

MM_DEVICE float mm_e8m0_to_f32(u8 e) { return e == 0xFF ? __uint_as_float(0x7fc00000u) : mm_pow2(int(e) - 127); }

// e2m1 code (low 4 bits): magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
MM_DEVICE float mm_e2m1_to_f32(u32 code) {
  u32 c = code & 7u;
  float m = c < 2u ? float(c) * 0.5f : __uint_as_float(((c >> 1) + 126u) << 23) * (1.f + float(c & 1u) * 0.5f);
  return (code & 8u) ? -m : m;
}

MM_DEVICE float mm_e4m3_to_f32(u8 b) {
  const int exp = (b >> 3) & 15, man = b & 7;
  float v;
  if (exp == 15 && man == 7) v = __uint_as_float(0x7fc00000u);
  else if (exp == 0) v = float(man) * mm_pow2(-9);
  else v = (1.f + float(man) * 0.125f) * mm_pow2(exp - 7);
  return (b & 0x80) ? -v : v;
}

// Round to nearest even; finite overflow and infinities saturate to +-448; NaN gives 0x7F.
MM_DEVICE u8 mm_f32_to_e4m3(float v) {
  if (v != v) return 0x7F;
  const u8 sign = (__float_as_uint(v) >> 24) & 0x80u;
  const float a = fabsf(v);
  if (a >= 448.f) return sign | 0x7E;
  if (a < 0.015625f) return sign | u8(rintf(a * 512.f));  // subnormal steps of 2^-9
  int e;
  const float f = frexpf(a, &e);
  float m = rintf((2.f * f - 1.f) * 8.f);
  int biased = e - 1 + 7;
  if (m == 8.f) m = 0.f, ++biased;
  return sign | u8(biased << 3) | u8(m);
}

// Four values' e4m3 codes, v[0] in the low byte: mm_f32_to_e4m3 four times, or one instruction per
// pair where the hardware has it (sm_89 and later: the same rounding, saturation and NaN code).
MM_DEVICE u32 mm_f32x4_to_e4m3(const float (&v)[4]) {
#if MEGAMOE_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u16 lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(v[1]), "f"(v[0]));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(v[3]), "f"(v[2]));
  return u32(lo) | (u32(hi) << 16);
#else
  u32 w = 0;
  for (int j = 0; j < 4; ++j) w |= u32(mm_f32_to_e4m3(v[j])) << (8 * j);
  return w;
#endif
}

// The least e with amax / 2^e <= 448 (0 for zero), clamped to [-127, 127]: ceil(log2(amax / 448))
// with the quotient rounded to float, as src/formats computes it. Where the quotient is a normal
// float its rounding never crosses a power of two, so for amax = m 2^k (m in [1, 2)) e is
// k - 8, plus 1 where m > 1.75 (448 = 1.75 2^8): no division. Below, the quotient is subnormal
// and rounds onto powers of two: the division itself decides.
MM_DEVICE int mm_fp8_block_exponent(float amax) {
  if (!(amax > 0.f)) return 0;
  const u32 b = __float_as_uint(amax);
  if (b >= 0x7f800000u) return 127;
  if (b >= 0x05600000u) return int(b >> 23) - 135 + ((b & 0x7fffffu) > 0x600000u ? 1 : 0);  // amax >= 1.75 2^-117
  int e;
  const float f = frexpf(amax / 448.f, &e);
  e = f == 0.5f ? e - 1 : e;
  return e < -127 ? -127 : e;
}

// Max of |v| over each aligned group of 32 lanes (also inside a 64-lane wavefront).
MM_DEVICE float mm_group32_absmax(float v) {
  v = fabsf(v);
  for (int m = 16; m > 0; m /= 2) v = fmaxf(v, mm_shfl_xor(v, m));
  return v;
}

}  // namespace megamoe
