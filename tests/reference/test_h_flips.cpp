// src/reference/h_flips.hpp: which h values the kernels' activation error can round either way,
// and how far; and the comparison past that reach (rel_l2_beyond).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "formats/formats.hpp"
#include "reference/h_flips.hpp"
#include "reference/moe_reference.hpp"

using namespace megamoe;
using namespace megamoe::reference;

TEST_CASE("h flips: a value on an fp8 rounding boundary reaches one step, others none", "[reference]") {
  // e4m3 holds 1 and 1.125 next to each other: 1.0625 is their midpoint (held as 1, the even one),
  // and the activation's error (2.4e-6 here) takes it either way. 1.03 and 1.1 are far from any.
  const std::vector<float> h = {1.03f, 1.0625f, 1.1f, -1.0625f}, g(4, 1.f);
  const std::vector<HFlip> f = h_flips(h, g, 0, true, 0);
  REQUIRE(f.size() == 2);
  CHECK(f[0].index == 1);
  CHECK(f[0].reach == 0.125f);
  CHECK(f[1].index == 3);
  CHECK(f[1].reach == 0.125f);
  // A scale moves every boundary with the values (e4m3 steps by 1/8 of each binade): the same.
  CHECK(h_flips(h, g, 0, true, -2).size() == 2);
  // Next to the boundary but past the error's reach: none.
  CHECK(h_flips({1.0625f + 1e-5f}, {1.f}, 0, true, 0).empty());
  // The error grows with |g|: at g = 80 (2.2e-5 relative) 1.0625 + 1e-5 is within reach again.
  CHECK(h_flips({1.0625f + 1e-5f}, {80.f}, 0, true, 0).size() == 1);
}

TEST_CASE("h flips: a block whose amax sits on a change of scale reaches its smallest values", "[reference]") {
  // amax 448 is e4m3's largest at the scale 2^0; a hair more takes 2^1, where 2^-9 (the least
  // subnormal at 2^0) is a tie between 0 and 2^-8 and rounds to 0.
  std::vector<float> h(32, 0.5f), g(32, 1.f);
  h[0] = 448.f, h[5] = std::ldexp(1.f, -9);
  const std::vector<HFlip> f = h_flips(h, g, 32, false, 0);
  bool small = false;
  for (const HFlip& x : f) small = small || (x.index == 5 && x.reach == std::ldexp(1.f, -9));
  CHECK(small);
  // The same block with amax 410: one scale, and no value near a boundary (400 would be the
  // midpoint of 384 and 416).
  h[0] = 410.f;
  CHECK(h_flips(h, g, 32, false, 0).empty());
}

TEST_CASE("h flips: the held value is the block quantizer's", "[reference]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> v(256);
  for (auto& x : v) x = n(rng);
  std::vector<std::uint8_t> q(v.size()), s(v.size() / 32);
  std::vector<float> back(v.size());
  formats::quantize_fp8_blocks(v.data(), v.size(), q.data(), s.data(), 32);
  formats::dequantize_fp8_blocks(q.data(), s.data(), v.size(), back.data(), 32);
  for (std::size_t b = 0; b < v.size() / 32; ++b) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b * 32 + i]));
    const int e = formats::fp8_block_exponent(amax);
    for (int i = 0; i < 32; ++i) CHECK(fp8_held(v[b * 32 + i], e) == back[b * 32 + i]);
  }
}

TEST_CASE("rel_l2_beyond: differences within reach count as none, the rest in full past it", "[reference]") {
  const float b[3] = {3.f, 4.f, 0.f}, reach[3] = {0.5f, 0.f, 0.25f};
  const float within[3] = {3.5f, 4.f, -0.25f};
  CHECK(rel_l2_beyond(within, b, reach, 3) == 0.0);
  const float past[3] = {4.f, 4.f, 0.f};  // 1 off where 0.5 is allowed: 0.5 of ||b|| = 5 is left
  CHECK(rel_l2_beyond(past, b, reach, 3) == Approx(0.1));
  CHECK(rel_l2(past, b, 3) == Approx(0.2));
}
