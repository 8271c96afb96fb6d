// MXFP4 expert weights: quantization round trip from fp32 and bf16, shape and bias checks, and the
// checkpoint layouts (gate and up apart, gpt-oss's interleaved rows) turned into W1's halves.
#include <catch2/catch.hpp>

#include <cmath>
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

TEST_CASE("gpt-oss's interleaved gate and up become W1's halves, every byte and bias in its place",
          "[weights][layout]") {
  const int E = 3, D = 64, I = 96;
  const std::size_t row_p = D / 2, row_s = D / 32;  // a W1 row's packed bytes and scales
  auto fill = [](std::vector<std::uint8_t>& v, int tag) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::uint8_t(tag * 37 + i * 11 + i / 256);
  };
  std::vector<std::uint8_t> gu(E * 2 * I * row_p), gu_s(E * 2 * I * row_s), down(E * D * I / 2), down_s(E * D * I / 32);
  fill(gu, 1), fill(gu_s, 2), fill(down, 3), fill(down_s, 4);
  // Each bias names its expert and stored row, exactly in fp32.
  std::vector<float> gu_b(E * 2 * I), down_b(E * D);
  for (std::size_t i = 0; i < gu_b.size(); ++i) gu_b[i] = 0.5f * float(i) - 100.f;
  for (std::size_t i = 0; i < down_b.size(); ++i) down_b[i] = -0.25f * float(i) + 7.f;

  const Mxfp4ExpertWeights w = from_interleaved_gate_up(E, D, I, gu.data(), gu_s.data(), gu_b.data(), down.data(),
                                                        down_s.data(), down_b.data());
  REQUIRE_NOTHROW(w.check());
  REQUIRE(w.has_biases());
  for (int e = 0; e < E; ++e)
    for (int i = 0; i < I; ++i)
      for (int part = 0; part < 2; ++part) {  // 0: gate i, stored row 2i; 1: up i, stored row 2i + 1
        const std::size_t expert = std::size_t(e) * 2 * I;
        const std::size_t stored = expert + 2 * i + part, halves = expert + part * I + i;
        for (std::size_t b = 0; b < row_p; ++b) REQUIRE(w.w1_packed[halves * row_p + b] == gu[stored * row_p + b]);
        for (std::size_t b = 0; b < row_s; ++b) REQUIRE(w.w1_scales[halves * row_s + b] == gu_s[stored * row_s + b]);
        REQUIRE(w.b1[halves] == gu_b[stored]);
      }
  CHECK(w.w2_packed == down);
  CHECK(w.w2_scales == down_s);
  CHECK(w.b2 == down_b);

  // Without biases: the same bytes, and no biases.
  const Mxfp4ExpertWeights nb =
      from_interleaved_gate_up(E, D, I, gu.data(), gu_s.data(), nullptr, down.data(), down_s.data(), nullptr);
  REQUIRE_NOTHROW(nb.check());
  CHECK(!nb.has_biases());
  CHECK(nb.w1_packed == w.w1_packed);
  CHECK(nb.w1_scales == w.w1_scales);
}

TEST_CASE("gpt-oss's layout: one bias without the other and bad dims are named", "[weights][layout]") {
  const int E = 2, D = 64, I = 64;
  std::vector<std::uint8_t> gu(E * 2 * I * D / 2), gu_s(E * 2 * I * D / 32);
  std::vector<std::uint8_t> down(E * D * I / 2), down_s(E * D * I / 32);
  std::vector<float> gu_b(E * 2 * I), down_b(E * D);
  CHECK_THROWS_WITH(from_interleaved_gate_up(E, D, I, gu.data(), gu_s.data(), gu_b.data(), down.data(), down_s.data(),
                                             nullptr),
                    Catch::Contains("down_bias is null") && Catch::Contains("both biases or neither"));
  CHECK_THROWS_WITH(from_interleaved_gate_up(E, D, I, gu.data(), gu_s.data(), nullptr, down.data(), down_s.data(),
                                             down_b.data()),
                    Catch::Contains("gate_up_bias is null") && Catch::Contains("both biases or neither"));
  CHECK_THROWS_WITH(from_interleaved_gate_up(E, D, 100, gu.data(), gu_s.data(), gu_b.data(), down.data(),
                                             down_s.data(), down_b.data()),
                    Catch::Contains("inter_dim = 100"));
}

TEST_CASE("weights: biases come both or neither, of their sizes, finite", "[weights]") {
  const int E = 2, D = 64, I = 32;
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(E, D, I);
  w.b1.assign(E * 2 * I, 0.5f), w.b2.assign(E * D, -1.f);
  REQUIRE_NOTHROW(w.check());
  SECTION("b1 without b2") {
    w.b2.clear();
    CHECK_THROWS_WITH(w.check(), Catch::Contains("b2 has 0 floats") && Catch::Contains("expected 128") &&
                                     Catch::Contains("both or neither"));
  }
  SECTION("b2 without b1") {
    w.b1.clear();
    CHECK_THROWS_WITH(w.check(), Catch::Contains("b1 has 0 floats") && Catch::Contains("expected 128"));
  }
  SECTION("a b1 of another size") {
    w.b1.pop_back();
    CHECK_THROWS_WITH(w.check(), Catch::Contains("b1 has 127 floats") && Catch::Contains("[experts][2*inter_dim]"));
  }
  SECTION("a b2 of another size") {
    w.b2.push_back(0.f);
    CHECK_THROWS_WITH(w.check(), Catch::Contains("b2 has 129 floats") && Catch::Contains("[experts][model_dim]"));
  }
  SECTION("a NaN in b2") {
    w.b2[77] = std::nanf("");
    CHECK_THROWS_WITH(w.check(), Catch::Contains("b2[77] = nan") && Catch::Contains("finite"));
  }
  SECTION("an infinity in b1") {
    w.b1[5] = -INFINITY;
    CHECK_THROWS_WITH(w.check(), Catch::Contains("b1[5] = -inf") && Catch::Contains("finite"));
  }
}

namespace {

// `experts` experts of 64 x 32 whose every byte and bias differs from its neighbours', for tests
// that move experts around.
Mxfp4ExpertWeights patterned_weights(int experts) {
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(experts, 64, 32);
  for (std::size_t i = 0; i < w.w1_packed.size(); ++i) w.w1_packed[i] = std::uint8_t(i * 7 + 1);
  for (std::size_t i = 0; i < w.w1_scales.size(); ++i) w.w1_scales[i] = std::uint8_t(120 + i % 9);
  for (std::size_t i = 0; i < w.w2_packed.size(); ++i) w.w2_packed[i] = std::uint8_t(i * 13 + 3);
  for (std::size_t i = 0; i < w.w2_scales.size(); ++i) w.w2_scales[i] = std::uint8_t(110 + i % 11);
  w.b1.resize(std::size_t(experts) * 64), w.b2.resize(std::size_t(experts) * 64);
  for (std::size_t i = 0; i < w.b1.size(); ++i) w.b1[i] = float(i) * 0.5f, w.b2[i] = -float(i);
  return w;
}

}  // namespace

TEST_CASE("gather_experts puts each named expert's bytes and biases in its slot; a bad id is named", "[weights][eplb]") {
  const Mxfp4ExpertWeights w = patterned_weights(4);
  const std::vector<int> slots = {2, 0, 2, 3, 3};
  const Mxfp4ExpertWeights g = gather_experts(w, slots);
  REQUIRE(g.experts == 5);
  g.check();
  auto per = [](const auto& v, int experts) { return v.size() / std::size_t(experts); };
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const std::size_t e = std::size_t(slots[s]);
    auto same = [&](const auto& from, const auto& to) {
      const std::size_t n = per(from, 4);
      REQUIRE(per(to, 5) == n);
      return std::equal(from.begin() + e * n, from.begin() + (e + 1) * n, to.begin() + s * n);
    };
    INFO("slot " << s);
    CHECK(same(w.w1_packed, g.w1_packed));
    CHECK(same(w.w1_scales, g.w1_scales));
    CHECK(same(w.w2_packed, g.w2_packed));
    CHECK(same(w.w2_scales, g.w2_scales));
    CHECK(same(w.b1, g.b1));
    CHECK(same(w.b2, g.b2));
  }
  CHECK_THROWS_WITH(gather_experts(w, {0, 4}), Catch::Contains("experts[1] = 4, expected 0..3"));
  CHECK_THROWS_WITH(gather_experts(w, {-1}), Catch::Contains("experts[0] = -1"));
}

TEST_CASE("append_experts puts b's experts after a's, biases too; other shapes are named", "[weights][shared]") {
  const Mxfp4ExpertWeights w = patterned_weights(5);
  // Experts 0..2 and 3..4 apart, appended: the five again, byte for byte.
  const Mxfp4ExpertWeights joined = append_experts(gather_experts(w, {0, 1, 2}), gather_experts(w, {3, 4}));
  joined.check();
  CHECK(joined.experts == 5);
  CHECK(joined.w1_packed == w.w1_packed);
  CHECK(joined.w1_scales == w.w1_scales);
  CHECK(joined.w2_packed == w.w2_packed);
  CHECK(joined.w2_scales == w.w2_scales);
  CHECK(joined.b1 == w.b1);
  CHECK(joined.b2 == w.b2);
  CHECK_THROWS_WITH(append_experts(w, Mxfp4ExpertWeights::zeros(1, 64, 64)),
                    Catch::Contains("experts of 64 x 32 (with biases) and of 64 x 64 (no biases)"));
}
