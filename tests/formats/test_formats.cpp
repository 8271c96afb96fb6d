// The host number formats against hand-computed values: the e2m1 table and its rounding,
// e4m3 rounding, subnormals, saturation and NaN, e8m0 edge cases, bf16 rounding, block scales.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "formats/formats.hpp"

using namespace megamoe::formats;

TEST_CASE("e2m1: the table of all 16 codes", "[formats]") {
  const float want[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.f, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    CHECK(e2m1_to_float(std::uint8_t(c)) == want[c]);
    CHECK(float_to_e2m1(want[c]) == c);  // every value encodes to its own code
  }
}

TEST_CASE("e2m1: round to nearest, ties to the even code, saturate at 6", "[formats]") {
  CHECK(float_to_e2m1(0.25f) == 0);   // tie 0 | 0.5 -> code 0
  CHECK(float_to_e2m1(0.26f) == 1);
  CHECK(float_to_e2m1(0.75f) == 2);   // tie 0.5 | 1 -> code 2 (1.0)
  CHECK(float_to_e2m1(1.25f) == 2);   // tie 1 | 1.5 -> code 2
  CHECK(float_to_e2m1(1.75f) == 4);   // tie 1.5 | 2 -> code 4 (2.0)
  CHECK(float_to_e2m1(2.5f) == 4);    // tie 2 | 3 -> code 4
  CHECK(float_to_e2m1(3.5f) == 6);    // tie 3 | 4 -> code 6 (4.0)
  CHECK(float_to_e2m1(5.0f) == 6);    // tie 4 | 6 -> code 6
  CHECK(float_to_e2m1(5.01f) == 7);
  CHECK(float_to_e2m1(100.f) == 7);   // saturates
  CHECK(float_to_e2m1(-0.6f) == (8 | 1));
  CHECK(float_to_e2m1(-1e9f) == (8 | 7));
}

TEST_CASE("e8m0: powers of two, the ends, NaN", "[formats]") {
  CHECK(e8m0_to_float(127) == 1.f);
  CHECK(e8m0_to_float(130) == 8.f);
  CHECK(e8m0_to_float(120) == 0.0078125f);
  CHECK(e8m0_to_float(0) == std::ldexp(1.f, -127));  // a float subnormal, still exact
  CHECK(e8m0_to_float(0) > 0.f);
  CHECK(e8m0_to_float(254) == std::ldexp(1.f, 127));
  CHECK(std::isnan(e8m0_to_float(255)));
}

TEST_CASE("e4m3: decoding", "[formats]") {
  CHECK(e4m3_to_float(0x38) == 1.f);
  CHECK(e4m3_to_float(0xB8) == -1.f);
  CHECK(e4m3_to_float(0x7E) == 448.f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.f, -9));  // smallest subnormal
  CHECK(e4m3_to_float(0x07) == 7 * std::ldexp(1.f, -9));
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.f, -6));  // smallest normal
  CHECK(e4m3_to_float(0x00) == 0.f);
  CHECK(std::signbit(e4m3_to_float(0x80)));
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(std::isnan(e4m3_to_float(0xFF)));
  CHECK(e4m3_to_float(0x77) == 240.f);  // 1.875 * 2^7
}

TEST_CASE("e4m3: rounding to nearest even, subnormals, saturation and NaN", "[formats]") {
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F) CHECK(float_to_e4m3(e4m3_to_float(std::uint8_t(b))) == b);  // exact round trip
  CHECK(float_to_e4m3(1.0625f) == 0x38);   // tie 1 | 1.125 -> even mantissa 0
  CHECK(float_to_e4m3(1.1875f) == 0x3A);   // tie 1.125 | 1.25 -> even mantissa 2
  CHECK(float_to_e4m3(1.07f) == 0x39);
  CHECK(float_to_e4m3(15.5f) == 0x58);     // tie 15 | 16 -> 16 (carries into the exponent)
  CHECK(float_to_e4m3(std::ldexp(1.f, -10)) == 0x00);      // tie 0 | 2^-9 -> 0
  CHECK(float_to_e4m3(3 * std::ldexp(1.f, -10)) == 0x02);  // tie 1 | 2 steps -> 2
  CHECK(float_to_e4m3(7.5f * std::ldexp(1.f, -9)) == 0x08);  // tie 7 | 8 steps -> smallest normal
  CHECK(float_to_e4m3(447.f) == 0x7E);
  CHECK(float_to_e4m3(464.f) == 0x7E);     // would round to 480: saturates
  CHECK(float_to_e4m3(1e6f) == 0x7E);
  CHECK(float_to_e4m3(-1e6f) == 0xFE);
  CHECK(float_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3(-0.f) == 0x80);
  CHECK(float_to_e4m3(1e-30f) == 0x00);
}

TEST_CASE("bf16: round to nearest even, NaN kept", "[formats]") {
  CHECK(float_to_bf16(1.f) == 0x3F80);
  CHECK(float_to_bf16(1.f + std::ldexp(1.f, -8)) == 0x3F80);      // tie -> even
  CHECK(float_to_bf16(1.f + 3 * std::ldexp(1.f, -8)) == 0x3F82);  // tie -> even (up)
  CHECK(float_to_bf16(-2.f) == 0xC000);
  CHECK(bf16_to_float(0x3F80) == 1.f);
  CHECK(bf16_to_float(0x4049) == 3.140625f);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("block scale exponents", "[formats]") {
  CHECK(fp8_block_exponent(448.f) == 0);
  CHECK(fp8_block_exponent(449.f) == 1);
  CHECK(fp8_block_exponent(224.f) == -1);
  CHECK(fp8_block_exponent(300.f) == 0);
  CHECK(fp8_block_exponent(1.f) == -8);   // 1/448 = 2^-8.8 -> -8
  CHECK(fp8_block_exponent(0.f) == 0);
  CHECK(fp8_block_exponent(1e-38f) == -127);  // clamped
  CHECK(mxfp4_block_exponent(6.f) == 0);
  CHECK(mxfp4_block_exponent(7.9f) == 0);  // OCP: floor(log2 amax) - 2, may clip to 6
  CHECK(mxfp4_block_exponent(8.f) == 1);
  CHECK(mxfp4_block_exponent(1.f) == -2);
  CHECK(mxfp4_block_exponent(0.f) == -127);
}

TEST_CASE("fp8 1x32 blocks: scale choice and round trip", "[formats]") {
  std::vector<float> v(64);
  const float first[8] = {0, 0.25, 0.5, 1, 1.5, 2, 3, 3.5};  // amax 3.5 = 448 * 2^-7 -> e = -7
  for (int i = 0; i < 32; ++i) v[i] = (i % 2 ? -1.f : 1.f) * first[i % 8];
  for (int i = 32; i < 64; ++i) v[i] = (i % 2 ? -1.f : 1.f) * 960.f;  // amax 960 -> e = 2, 240 each
  std::vector<std::uint8_t> q(64), s(2);
  quantize_fp8_blocks(v.data(), 64, q.data(), s.data());
  CHECK(int(s[0]) == 127 - 7);
  CHECK(int(s[1]) == 127 + 2);
  std::vector<float> back(64);
  dequantize_fp8_blocks(q.data(), s.data(), 64, back.data());
  for (int i = 0; i < 64; ++i) CHECK(back[i] == v[i]);  // all exactly representable at these scales
}

TEST_CASE("MXFP4 blocks: nibble order, scale, exact round trip of representable values", "[formats]") {
  std::vector<float> v(32);
  const float mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int i = 0; i < 32; ++i) v[i] = (i % 3 ? 1.f : -1.f) * mags[i % 8] * 0.25f;  // amax 1.5 -> e = -2
  std::vector<std::uint8_t> packed(16), scales(1);
  quantize_mxfp4(v.data(), 32, packed.data(), scales.data());
  CHECK(int(scales[0]) == 127 - 2);
  CHECK((packed[0] & 15) == 8);         // element 0: -0 (sign set, i % 3 == 0)
  CHECK((packed[0] >> 4) == 1);         // element 1: +0.5 * 4 / 4 -> code 1
  CHECK((packed[1] & 15) == 2);         // element 2: +1
  CHECK((packed[1] >> 4) == (8 | 3));   // element 3: -1.5
  std::vector<float> back(32);
  dequantize_mxfp4(packed.data(), scales.data(), 32, back.data());
  for (int i = 0; i < 32; ++i) CHECK(back[i] == v[i]);
}
