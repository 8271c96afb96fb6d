// templates/common/numerics.cuh on the GPU against the host's formats (src/formats): the fp8
// packing (mm_f32x4_to_e4m3, one cvt.satfinite per pair on sm_89 and later) gives the host
// encoder's bytes for every kind of float: zeros, float and e4m3 subnormals, every tie between two
// e4m3 values and the floats beside it, the saturation edge, infinities, NaN of both signs, and
// random values of both signs; the block exponent is the host quantizer's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "formats/formats.hpp"
#include "support/elementwise_kernel.hpp"

using namespace megamoe;

namespace {

std::vector<float> probe_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.f, -0.f, inf, -inf, nan, -nan, 1e-40f, -1e-40f, 448.f, -448.f, 464.f, 480.f, 1e30f};
  for (int c = 0; c < 0x7E; ++c) {  // every positive e4m3 code and the tie above it
    const float lo = formats::e4m3_to_float(std::uint8_t(c)), hi = formats::e4m3_to_float(std::uint8_t(c + 1));
    const float mid = (lo + hi) / 2;  // exact: both are short binary fractions
    for (float x : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, inf)}) v.push_back(x), v.push_back(-x);
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-14, 10);
  while (v.size() % 4 || v.size() < 8192) v.push_back((rng() & 1 ? -1.f : 1.f) * std::ldexp(mant(rng), exp(rng)));
  return v;
}

}  // namespace

TEST_CASE("the device's fp8 packing gives the host encoder's bytes", "[gpu][numerics]") {
  const std::vector<float> v = probe_values();
  const std::vector<std::uint32_t> words = test::run_elementwise<float, std::uint32_t>(
      "test_e4m3_pack", {"common/numerics.cuh"}, "float", "unsigned",
      "const float v[4] = {in[4 * i], in[4 * i + 1], in[4 * i + 2], in[4 * i + 3]};\n"
      "  out[i] = megamoe::mm_f32x4_to_e4m3(v);",
      v, v.size() / 4);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint8_t got = std::uint8_t(words[i / 4] >> (8 * (i % 4)));
    const std::uint8_t want = formats::float_to_e4m3(v[i]);
    if (got != want && ++wrong <= 10) {
      std::uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      UNSCOPED_INFO("value " << v[i] << " (0x" << std::hex << bits << "): device 0x" << int(got) << ", host 0x"
                             << int(want) << std::dec);
    }
  }
  CHECK(wrong == 0);
}

// Every exponent field with the mantissas at and beside 1.75 (448 = 1.75 2^8), where the block
// exponent steps, and at the ends; subnormals, zeros, infinities, NaN, negative values; random.
TEST_CASE("the device's fp8 block exponent is the host quantizer's", "[gpu][numerics]") {
  std::vector<std::uint32_t> bits = {0u, 1u, 0xE0u, 0xE1u, 0x7fffffu, 0x80000000u, 0x7f800000u, 0xff800000u,
                                     0x7fc00000u, 0xffc00000u, 0x04600000u, 0x04600001u, 0x055fffffu, 0x05600000u};
  for (std::uint32_t e = 0; e < 255; ++e)
    for (std::uint32_t m : {0u, 1u, 0x5fffffu, 0x600000u, 0x600001u, 0x7fffffu}) bits.push_back(e << 23 | m);
  std::mt19937_64 rng(11);
  while (bits.size() < 16384) bits.push_back(std::uint32_t(rng()));
  std::vector<float> v(bits.size());
  std::memcpy(v.data(), bits.data(), bits.size() * 4);
  const std::vector<int> got = test::run_elementwise<float, int>(
      "test_fp8_block_exponent", {"common/numerics.cuh"}, "float", "int",
      "out[i] = megamoe::mm_fp8_block_exponent(in[i]);", v, v.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const int want = formats::fp8_block_exponent(v[i]);
    if (got[i] != want && ++wrong <= 10)
      UNSCOPED_INFO("amax 0x" << std::hex << bits[i] << std::dec << " (" << v[i] << "): device " << got[i]
                              << ", host " << want);
  }
  CHECK(wrong == 0);
}
