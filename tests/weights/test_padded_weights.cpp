// Weights padded to a path's shape: the model's values where they were, zeros elsewhere, and no
// row's largest scale changed (the kernels' layout takes each row's scales relative to it).
#include <catch2/catch.hpp>

#include "formats/formats.hpp"
#include "megamoe/errors.hpp"
#include "support/normal_weights.hpp"
#include "weights/padded_weights.hpp"

using namespace megamoe;

namespace {

std::vector<float> dequantized(const std::vector<std::uint8_t>& packed, const std::vector<std::uint8_t>& scales) {
  std::vector<float> v(packed.size() * 2);
  formats::dequantize_mxfp4(packed.data(), scales.data(), v.size(), v.data());
  return v;
}

}  // namespace

TEST_CASE("padded weights: every value where it was, zeros around it, biases with them", "[weights]") {
  const int E = 3, D = 96, I = 64, Dp = 128, Ip = 192;
  const Mxfp4ExpertWeights w = test::normal_expert_weights(E, D, I, 7, 1.f, true);
  const Mxfp4ExpertWeights p = pad_expert_weights(w, Dp, Ip);
  REQUIRE_NOTHROW(p.check());
  CHECK(p.model_dim == Dp);
  CHECK(p.inter_dim == Ip);
  const std::vector<float> a1 = dequantized(w.w1_packed, w.w1_scales), p1 = dequantized(p.w1_packed, p.w1_scales);
  const std::vector<float> a2 = dequantized(w.w2_packed, w.w2_scales), p2 = dequantized(p.w2_packed, p.w2_scales);
  for (int e = 0; e < E; ++e) {
    for (int half = 0; half < 2; ++half)  // gate rows, then up rows: each half keeps its place
      for (int r = 0; r < Ip; ++r)
        for (int d = 0; d < Dp; ++d) {
          const float got = p1[((std::size_t(e) * 2 + half) * Ip + r) * Dp + d];
          const float want = r < I && d < D ? a1[((std::size_t(e) * 2 + half) * I + r) * D + d] : 0.f;
          REQUIRE(got == want);
        }
    for (int r = 0; r < Dp; ++r)
      for (int i = 0; i < Ip; ++i) {
        const float want = r < D && i < I ? a2[(std::size_t(e) * D + r) * I + i] : 0.f;
        REQUIRE(p2[(std::size_t(e) * Dp + r) * Ip + i] == want);
      }
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < Ip; ++i)
        REQUIRE(p.b1[(std::size_t(e) * 2 + half) * Ip + i] == (i < I ? w.b1[(std::size_t(e) * 2 + half) * I + i] : 0.f));
    for (int d = 0; d < Dp; ++d) REQUIRE(p.b2[std::size_t(e) * Dp + d] == (d < D ? w.b2[std::size_t(e) * D + d] : 0.f));
  }
  // A padded block's scale is the least e8m0 (0): no row's largest scale moves.
  for (std::size_t r = 0; r < std::size_t(E) * 2 * Ip; ++r)
    for (int b = 0; b < Dp / 32; ++b)
      if (b >= D / 32 || int(r % Ip) >= I) REQUIRE(p.w1_scales[r * (Dp / 32) + b] == 0);
  for (std::size_t r = 0; r < std::size_t(E) * Dp; ++r)
    for (int b = 0; b < Ip / 32; ++b)
      if (b >= I / 32 || int(r % Dp) >= D) REQUIRE(p.w2_scales[r * (Ip / 32) + b] == 0);
}

TEST_CASE("padded weights: the same shape is a copy, a smaller one an error", "[weights]") {
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(2, 64, 128);
  for (std::size_t i = 0; i < w.w1_packed.size(); ++i) w.w1_packed[i] = std::uint8_t(i * 7);
  const Mxfp4ExpertWeights p = pad_expert_weights(w, 64, 128);
  CHECK(p.w1_packed == w.w1_packed);
  CHECK(p.w2_scales == w.w2_scales);
  CHECK_FALSE(p.has_biases());
  CHECK_THROWS_WITH(pad_expert_weights(w, 32, 128), Catch::Contains("smaller"));
}
