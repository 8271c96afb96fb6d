// load_checkpoint: each layout named gives the library's weights (W1 as halves, b1 alike), built
// here by independent index arithmetic from one set of halves; and what each layout refuses.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "megamoe/errors.hpp"
#include "megamoe/weights.hpp"
#include "weights/checkpoint_arrays.hpp"

using namespace megamoe;

namespace {

constexpr int E = 2, D = 64, I = 96;

// The halves every layout below is made from: bytes and biases that differ everywhere.
struct Halves {
  std::vector<std::uint8_t> w1 = bytes(E * 2 * I * D / 2, 3), s1 = bytes(E * 2 * I * D / 32, 5),
                            w2 = bytes(E * D * I / 2, 7), s2 = bytes(E * D * I / 32, 11);
  std::vector<float> b1 = floats(E * 2 * I, 0.25f), b2 = floats(E * D, -0.5f);

  static std::vector<std::uint8_t> bytes(std::size_t n, unsigned k) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t(i * k + i / 251);
    return v;
  }
  static std::vector<float> floats(std::size_t n, float k) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = k * float(i % 97) - 1.f;
    return v;
  }
};

// Rows of `per` elements of each expert's 2I rows, reordered: part(half, i) is row half * I + i.
template <class T>
std::vector<T> half_rows(const std::vector<T>& halves, std::size_t per, int half) {
  std::vector<T> out;
  for (int e = 0; e < E; ++e)
    for (int i = 0; i < I; ++i) {
      const T* row = halves.data() + ((std::size_t(e) * 2 + half) * I + i) * per;
      out.insert(out.end(), row, row + per);
    }
  return out;
}
template <class T>
std::vector<T> interleaved(const std::vector<T>& halves, std::size_t per) {
  std::vector<T> out(halves.size());
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < 2 * I; ++r)  // gpt-oss's row r is gate r / 2 (even r) or up r / 2 (odd r)
      std::memcpy(out.data() + (std::size_t(e) * 2 * I + r) * per,
                  halves.data() + ((std::size_t(e) * 2 + r % 2) * I + r / 2) * per, per * sizeof(T));
  return out;
}

void check_is(const Mxfp4ExpertWeights& w, const Halves& h, bool biases) {
  CHECK(w.w1_packed == h.w1);
  CHECK(w.w1_scales == h.s1);
  CHECK(w.w2_packed == h.w2);
  CHECK(w.w2_scales == h.s2);
  CHECK(w.b1 == (biases ? h.b1 : std::vector<float>{}));
  CHECK(w.b2 == (biases ? h.b2 : std::vector<float>{}));
}

}  // namespace

TEST_CASE("load_checkpoint: every layout gives the same halves and biases", "[weights]") {
  const Halves h;
  for (bool biases : {true, false}) {
    INFO("biases " << biases);
    const float* b1 = biases ? h.b1.data() : nullptr;
    const float* b2 = biases ? h.b2.data() : nullptr;
    CheckpointTensors halves{.w1 = h.w1.data(), .w1_scales = h.s1.data(), .w2 = h.w2.data(), .w2_scales = h.s2.data(),
                             .b1 = b1, .b2 = b2};
    check_is(load_checkpoint(CheckpointLayout::halves, E, D, I, halves), h, biases);

    const auto gate = half_rows(h.w1, D / 2, 0), up = half_rows(h.w1, D / 2, 1);
    const auto gate_s = half_rows(h.s1, D / 32, 0), up_s = half_rows(h.s1, D / 32, 1);
    CheckpointTensors apart = halves;
    apart.w1 = gate.data(), apart.w1_scales = gate_s.data(), apart.up = up.data(), apart.up_scales = up_s.data();
    check_is(load_checkpoint(CheckpointLayout::separate_gate_up, E, D, I, apart), h, biases);

    const auto gu = interleaved(h.w1, D / 2), gu_s = interleaved(h.s1, D / 32);
    const auto gu_b = interleaved(h.b1, 1);
    CheckpointTensors oss = halves;
    oss.w1 = gu.data(), oss.w1_scales = gu_s.data(), oss.b1 = biases ? gu_b.data() : nullptr;
    check_is(load_checkpoint(CheckpointLayout::gpt_oss, E, D, I, oss), h, biases);
    // The shapes cannot tell: gpt-oss's tensors named as halves load, and are not the model's.
    CHECK(load_checkpoint(CheckpointLayout::halves, E, D, I, oss).w1_packed != h.w1);
  }
}

TEST_CASE("load_checkpoint names a missing pointer, one the layout does not take, a lone bias", "[weights]") {
  const Halves h;
  const CheckpointTensors ok{.w1 = h.w1.data(), .w1_scales = h.s1.data(), .w2 = h.w2.data(), .w2_scales = h.s2.data()};
  CheckpointTensors t = ok;
  t.w2_scales = nullptr;
  CHECK_THROWS_WITH(load_checkpoint(CheckpointLayout::halves, E, D, I, t),
                    Catch::Contains("tensors.w2_scales is null") && Catch::Contains("layout halves"));
  t = ok;
  t.up = h.w1.data();
  CHECK_THROWS_WITH(load_checkpoint(CheckpointLayout::gpt_oss, E, D, I, t),
                    Catch::Contains("tensors.up is given with layout gpt_oss"));
  CHECK_THROWS_WITH(load_checkpoint(CheckpointLayout::separate_gate_up, E, D, I, ok),
                    Catch::Contains("tensors.up is null") && Catch::Contains("separate_gate_up"));
  t = ok;
  t.b2 = h.b2.data();
  CHECK_THROWS_WITH(load_checkpoint(CheckpointLayout::halves, E, D, I, t),
                    Catch::Contains("tensors.b2 is given and tensors.b1 is null"));
  std::vector<float> nan_b1 = h.b1;
  nan_b1[5] = std::nanf("");
  t.b1 = nan_b1.data();
  CHECK_THROWS_WITH(load_checkpoint(CheckpointLayout::halves, E, D, I, t), Catch::Contains("b1[5]"));
  CHECK_THROWS_WITH(load_checkpoint(CheckpointLayout::halves, E, D, 100, ok), Catch::Contains("inter_dim = 100"));
}

TEST_CASE("checkpoint layouts by name", "[weights]") {
  for (CheckpointLayout l : {CheckpointLayout::halves, CheckpointLayout::separate_gate_up, CheckpointLayout::gpt_oss})
    CHECK(checkpoint_layout_from_name(to_string(l)) == l);
  CHECK_THROWS_WITH(checkpoint_layout_from_name("interleaved"),
                    Catch::Contains("'interleaved'") && Catch::Contains("'halves' or 'separate_gate_up' or 'gpt_oss'"));
  try {
    checkpoint_layout_from_name("gpt-oss");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.field == "layout");
    CHECK(e.value == "'gpt-oss'");
  }
}

// Dense weights go through the same layouts: gpt-oss's transformers parameters (x @ W, the output
// axis interleaved) transposed and de-interleaved, gate and up apart joined; each element in place.
TEST_CASE("checkpoint_to_halves: dense gpt_oss and separate_gate_up weights land where halves put them",
          "[weights][layout]") {
  const int E = 2, D = 64, I = 32;
  auto value = [](int e, int r, int c) { return float(e * 100000 + r * 1000 + c); };  // halves' W1[e][r][c]
  std::vector<float> gate_up(std::size_t(E) * D * 2 * I), down(std::size_t(E) * I * D), gate(E * I * D), up(E * I * D);
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < 2 * I; ++r)
      for (int c = 0; c < D; ++c) {
        const int interleaved = r < I ? 2 * r : 2 * (r - I) + 1;  // gate i at 2i, up i at 2i + 1
        gate_up[(std::size_t(e) * D + c) * 2 * I + interleaved] = value(e, r, c);
        (r < I ? gate : up)[(std::size_t(e) * I + r % I) * D + c] = value(e, r, c);
      }
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < I; ++c) down[(std::size_t(e) * I + c) * D + r] = float(-e * 100000 - r * 1000 - c);
  CheckpointArrays gpt;
  gpt.w1 = {"w1", gate_up.data(), {E, D, 2 * I}, 4}, gpt.w2 = {"w2", down.data(), {E, I, D}, 4};
  const HalvesArrays h = checkpoint_to_halves(CheckpointLayout::gpt_oss, E, D, I, gpt);
  REQUIRE(!h.mxfp4);
  REQUIRE(h.element_bytes == 4);
  std::vector<float> w1(h.w1.size() / 4), w2(h.w2.size() / 4);
  std::memcpy(w1.data(), h.w1.data(), h.w1.size()), std::memcpy(w2.data(), h.w2.data(), h.w2.size());
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < 2 * I; ++r)
      for (int c = 0; c < D; ++c) REQUIRE(w1[(std::size_t(e) * 2 * I + r) * D + c] == value(e, r, c));
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < I; ++c) REQUIRE(w2[(std::size_t(e) * D + r) * I + c] == float(-e * 100000 - r * 1000 - c));
  CheckpointArrays apart;
  apart.w1 = {"gate", gate.data(), {E, I, D}, 4}, apart.up = {"up", up.data(), {E, I, D}, 4};
  apart.w2 = {"w2", w2.data(), {E, D, I}, 4};
  CHECK(checkpoint_to_halves(CheckpointLayout::separate_gate_up, E, D, I, apart).w1 == h.w1);
}

TEST_CASE("checkpoint_to_halves names the array, its shape and the layout's", "[weights][layout]") {
  const int E = 2, D = 64, I = 32;
  std::vector<std::uint8_t> bytes(std::size_t(E) * 2 * I * D);
  auto error = [&](CheckpointLayout layout, const CheckpointArrays& a) {
    try {
      checkpoint_to_halves(layout, E, D, I, a);
    } catch (const InputError& e) {
      return e;
    }
    FAIL("no InputError");
    return InputError("", "", "");
  };
  CheckpointArrays a;  // MXFP4 as gpt-oss ships it, with W1's blocks 8 wide
  a.w1 = {"w1", bytes.data(), {E, 2 * I, D / 32, 8}}, a.w1_scales = {"w1_scales", bytes.data(), {E, 2 * I, D / 32}};
  a.w2 = {"w2", bytes.data(), {E, D, I / 2}}, a.w2_scales = {"w2_scales", bytes.data(), {E, D, I / 32}};
  InputError e = error(CheckpointLayout::gpt_oss, a);
  CHECK(e.field == "w1");
  CHECK(e.value == "shape [2, 64, 2, 8]");
  CHECK(e.expected == "[2, 64, 2, 16] (gate_up_proj_blocks) or [2, 64, 32] with layout='gpt_oss'");
  a.w1.shape = {E, 2 * I, D / 2};
  std::swap(a.w1.shape, a.w1_scales.shape);  // blocks and scales swapped
  e = error(CheckpointLayout::halves, a);
  CHECK(e.field == "w1");
  CHECK(e.value == "shape [2, 64, 2], the shape of w1_scales");
  std::swap(a.w1.shape, a.w1_scales.shape);
  a.up = {"up", bytes.data(), {E, I, D / 2}};
  e = error(CheckpointLayout::halves, a);
  CHECK(e.field == "up");
  CHECK_THAT(e.expected, Catch::Contains("only separate_gate_up stores up apart"));
}

TEST_CASE("checkpoint_to_halves: an up bias without the gate's, and W2's blocks and scales swapped apart, are named",
          "[weights][layout]") {
  const int E = 2, D = 64, I = 32;
  std::vector<std::uint8_t> bytes(std::size_t(E) * 2 * I * D);
  std::vector<float> bias(std::size_t(E) * 2 * I);
  CheckpointArrays a;  // MXFP4 with gate and up apart
  a.w1 = {"w1[0] (gate)", bytes.data(), {E, I, D / 2}}, a.up = {"w1[1] (up)", bytes.data(), {E, I, D / 2}};
  a.w1_scales = {"w1_scales[0] (gate)", bytes.data(), {E, I, D / 32}};
  a.up_scales = {"w1_scales[1] (up)", bytes.data(), {E, I, D / 32}};
  a.w2 = {"w2", bytes.data(), {E, D, I / 32}}, a.w2_scales = {"w2_scales", bytes.data(), {E, D, I / 2}};  // swapped
  try {
    check_checkpoint(CheckpointLayout::separate_gate_up, E, D, I, a);
    FAIL("no InputError");
  } catch (const InputError& e) {
    CHECK(e.field == "w2");
    CHECK(e.value == "shape [2, 64, 1], the shape of w2_scales");
  }
  std::swap(a.w2.shape, a.w2_scales.shape);
  CHECK(check_checkpoint(CheckpointLayout::separate_gate_up, E, D, I, a).mxfp4);
  a.up_b1 = {"b1[1] (up)", bias.data(), {E, I}, 4};
  CHECK_THROWS_AS(check_checkpoint(CheckpointLayout::separate_gate_up, E, D, I, a), InputError);
  CHECK_THROWS_WITH(check_checkpoint(CheckpointLayout::separate_gate_up, E, D, I, a), Catch::Contains("b1[1] (up)"));
}
