// MXFP4 expert weights: quantization round trip from fp32 and bf16, and shape checks.
#include <catch2/catch.hpp>

#include <random>

#include "formats/formats.hpp"
#include "megamoe/errors.hpp"
#include "megamoe/weights.hpp"

using namespace megamoe;

TEST_CASE("weights: values on the MXFP4 grid survive quantize and dequantize exactly", "[weights]") {
  const int E = 3, D = 64, I = 32;
  std::mt19937 rng(1);
  std::vector<float> w1(std::size_t(E) * 2 * I * D), w2(std::size_t(E) * D * I);
  // Each 32-block: one element at +-6 * 2^s (fixing the scale), the rest random grid values.
  auto fill = [&](std::vector<float>& v) {
    for (std::size_t b = 0; b < v.size() / 32; ++b) {
      float scale = std::ldexp(1.f, int(rng() % 20) - 10);
      for (int i = 0; i < 32; ++i) v[b * 32 + i] = formats::e2m1_to_float(std::uint8_t(rng() % 16)) * scale;
      v[b * 32 + rng() % 32] = (rng() % 2 ? 6.f : -6.f) * scale;
    }
  };
  fill(w1), fill(w2);
  Mxfp4ExpertWeights q = quantize_expert_weights(w1.data(), w2.data(), E, D, I);
  REQUIRE_NOTHROW(q.check());
  std::vector<float> b1(w1.size()), b2(w2.size());
  formats::dequantize_mxfp4(q.w1_packed.data(), q.w1_scales.data(), b1.size(), b1.data());
  formats::dequantize_mxfp4(q.w2_packed.data(), q.w2_scales.data(), b2.size(), b2.data());
  CHECK(b1 == w1);
  CHECK(b2 == w2);

  std::vector<std::uint16_t> h1(w1.size()), h2(w2.size());
  for (std::size_t i = 0; i < w1.size(); ++i) h1[i] = formats::float_to_bf16(w1[i]);
  for (std::size_t i = 0; i < w2.size(); ++i) h2[i] = formats::float_to_bf16(w2[i]);
  Mxfp4ExpertWeights qb = quantize_expert_weights_bf16(h1.data(), h2.data(), E, D, I);
  CHECK(qb.w1_packed == q.w1_packed);
  CHECK(qb.w1_scales == q.w1_scales);
  CHECK(qb.w2_packed == q.w2_packed);
  CHECK(qb.w2_scales == q.w2_scales);
}

TEST_CASE("weights: off-grid values land on the nearest grid value at the block's scale", "[weights]") {
  std::vector<float> w1(2 * 32 * 32), w2(32 * 32);
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0.f, 0.02f);
  for (auto& v : w1) v = n(rng);
  for (auto& v : w2) v = n(rng);
  Mxfp4ExpertWeights q = quantize_expert_weights(w1.data(), w2.data(), 1, 32, 32);
  std::vector<float> b1(w1.size());
  formats::dequantize_mxfp4(q.w1_packed.data(), q.w1_scales.data(), b1.size(), b1.data());
  for (std::size_t i = 0; i < w1.size(); ++i) {
    float scale = formats::e8m0_to_float(q.w1_scales[i / 32]);
    // Grid steps are at most 2 * scale wide (between 4 and 6), so the error is at most one scale,
    // except for clipping at 6 * scale, which OCP's floor(log2) exponent allows.
    float clip = std::fabs(w1[i]) > 6 * scale ? std::fabs(w1[i]) - 6 * scale : 0.f;
    CHECK(std::fabs(b1[i] - w1[i]) <= scale + clip);
  }
}

TEST_CASE("weights: wrong sizes are named", "[weights]") {
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(2, 64, 32);
  REQUIRE_NOTHROW(w.check());
  w.w2_scales.pop_back();
  CHECK_THROWS_WITH(w.check(), Catch::Contains("w2_scales") && Catch::Contains("127") && Catch::Contains("128"));
  CHECK_THROWS_WITH(Mxfp4ExpertWeights::zeros(2, 48, 32), Catch::Contains("model_dim = 48"));
}
