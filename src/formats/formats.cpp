#include "formats/formats.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace megamoe::formats {

float e2m1_to_float(std::uint8_t code) {
  static constexpr float kMag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  float m = kMag[code & 7];
  return (code & 8) ? -m : m;
}

std::uint8_t float_to_e2m1(float v) {
  if (std::isnan(v)) return 0;
  std::uint8_t sign = std::signbit(v) ? 8 : 0;
  float a = std::fabs(v);
  // Midpoints between neighbours; at a tie the even code wins (<= where the lower code is even).
  std::uint8_t code = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
                    : a <= 2.5f  ? 4 : a < 3.5f  ? 5 : a <= 5.f   ? 6 : 7;
  return sign | code;
}

float e8m0_to_float(std::uint8_t e) {
  if (e == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.f, int(e) - 127);
}

float e4m3_to_float(std::uint8_t b) {
  int exp = (b >> 3) & 15, man = b & 7;
  float sign = (b & 0x80) ? -1.f : 1.f;
  if (exp == 15 && man == 7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(float(man), -9);
  return sign * std::ldexp(1.f + float(man) / 8.f, exp - 7);
}

std::uint8_t float_to_e4m3(float v) {
  if (std::isnan(v)) return 0x7F;
  std::uint8_t sign = std::signbit(v) ? 0x80 : 0;
  float a = std::fabs(v);
  if (a >= kE4m3Max) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal, in steps of 2^-9; 8 steps is the smallest normal
    return sign | std::uint8_t(std::nearbyint(a * 512.f));
  }
  int e;
  float f = std::frexp(a, &e);         // a = f * 2^e, f in [0.5, 1)
  float m = std::nearbyint((2.f * f - 1.f) * 8.f);  // mantissa in eighths, ties to even
  int biased = e - 1 + 7;
  if (m == 8.f) m = 0.f, ++biased;
  return sign | std::uint8_t(biased << 3) | std::uint8_t(m);
}

float bf16_to_float(std::uint16_t b) {
  std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t float_to_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

int fp8_block_exponent(float amax) {
  if (!(amax > 0.f)) return 0;
  if (std::isinf(amax)) return 127;
  int e;
  float f = std::frexp(amax / kE4m3Max, &e);  // ceil(log2(r)) is e, or e-1 when r is a power of two
  return std::clamp(f == 0.5f ? e - 1 : e, -127, 127);
}

int mxfp4_block_exponent(float amax) {
  if (!(amax > 0.f)) return -127;
  if (std::isinf(amax)) return 127;
  int e;
  std::frexp(amax, &e);  // floor(log2(amax)) = e - 1
  return std::clamp(e - 1 - 2, -127, 127);
}

void quantize_fp8_blocks(const float* v, std::size_t n, std::uint8_t* q, std::uint8_t* scales, int block) {
  for (std::size_t b = 0; b < n / block; ++b) {
    const float* x = v + b * block;
    float amax = 0.f;
    for (int i = 0; i < block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    int e = fp8_block_exponent(amax);
    scales[b] = std::uint8_t(e + 127);
    float inv = std::ldexp(1.f, -e);
    for (int i = 0; i < block; ++i) q[b * block + i] = float_to_e4m3(x[i] * inv);
  }
}

void dequantize_fp8_blocks(const std::uint8_t* q, const std::uint8_t* scales, std::size_t n, float* out, int block) {
  for (std::size_t i = 0; i < n; ++i) out[i] = e4m3_to_float(q[i]) * e8m0_to_float(scales[i / block]);
}

void quantize_mxfp4(const float* v, std::size_t n, std::uint8_t* packed, std::uint8_t* scales) {
  for (std::size_t b = 0; b < n / kBlock; ++b) {
    const float* x = v + b * kBlock;
    float amax = 0.f;
    bool nan = false;
    for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(x[i])), nan |= std::isnan(x[i]);
    int e = mxfp4_block_exponent(amax);
    scales[b] = nan ? 0xFF : std::uint8_t(e + 127);
    float inv = std::ldexp(1.f, -e);
    for (int i = 0; i < kBlock; i += 2) {
      std::uint8_t lo = float_to_e2m1(x[i] * inv), hi = float_to_e2m1(x[i + 1] * inv);
      packed[(b * kBlock + i) / 2] = std::uint8_t(lo | (hi << 4));
    }
  }
}

void dequantize_mxfp4(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float* out) {
  float value[16];  // by table, and one scale per block: the CPU references dequantize 2 GB at a time
  for (int c = 0; c < 16; ++c) value[c] = e2m1_to_float(std::uint8_t(c));
  for (std::size_t b = 0; b < n / kBlock; ++b) {
    const float scale = e8m0_to_float(scales[b]);
    const std::uint8_t* bytes = packed + b * (kBlock / 2);
    float* o = out + b * kBlock;
    for (int j = 0; j < kBlock / 2; ++j) o[2 * j] = value[bytes[j] & 15] * scale, o[2 * j + 1] = value[bytes[j] >> 4] * scale;
  }
  for (std::size_t i = n / kBlock * kBlock; i < n; ++i)  // a last, partial block
    out[i] = value[i % 2 ? packed[i / 2] >> 4 : packed[i / 2] & 15] * e8m0_to_float(scales[i / kBlock]);
}

}  // namespace megamoe::formats
