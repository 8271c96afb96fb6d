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

TEST_CASE("gate and up stored apart join into W1's halves, every byte in its place", "[weights][layout]") {
  const int E = 3, D = 64, I = 96;  // model_dim: two MX blocks a row; inter_dim: three
  const std::size_t hp = std::size_t(I) * D / 2, hs = hp / 16, w2p = std::size_t(D) * I / 2, w2s = w2p / 16;
  // Each byte names its tensor, expert and offset, so a misplaced one shows.
  auto fill = [](std::vector<std::uint8_t>& v, int tag) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::uint8_t(tag * 37 + i * 11 + i / 256);
  };
  std::vector<std::uint8_t> gate(E * hp), up(E * hp), gate_s(E * hs), up_s(E * hs), w2(E * w2p), w2_s(E * w2s);
  fill(gate, 1), fill(up, 2), fill(gate_s, 3), fill(up_s, 4), fill(w2, 5), fill(w2_s, 6);
  const Mxfp4ExpertWeights w =
      join_gate_up(E, D, I, gate.data(), gate_s.data(), up.data(), up_s.data(), w2.data(), w2_s.data());
  w.check();
  for (int e = 0; e < E; ++e)
    for (int row = 0; row < 2 * I; ++row) {
      const bool is_gate = row < I;
      const int r = is_gate ? row : row - I;
      for (int b = 0; b < D / 2; ++b)  // packed bytes of the row
        REQUIRE(w.w1_packed[(std::size_t(e) * 2 * I + row) * (D / 2) + b] ==
                (is_gate ? gate : up)[(std::size_t(e) * I + r) * (D / 2) + b]);
      for (int b = 0; b < D / 32; ++b)
        REQUIRE(w.w1_scales[(std::size_t(e) * 2 * I + row) * (D / 32) + b] ==
                (is_gate ? gate_s : up_s)[(std::size_t(e) * I + r) * (D / 32) + b]);
    }
  CHECK(w.w2_packed == w2);
  CHECK(w.w2_scales == w2_s);
  CHECK_THROWS_WITH(join_gate_up(E, D, 100, gate.data(), gate_s.data(), up.data(), up_s.data(), w2.data(), w2_s.data()),
                    Catch::Contains("inter_dim = 100"));
}
