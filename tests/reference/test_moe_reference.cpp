// The layer references on a case small enough to compute by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "formats/formats.hpp"
#include "reference/activation_ref.hpp"
#include "reference/moe_reference.hpp"
#include "support/normal_weights.hpp"

using namespace megamoe;
using Catch::Matchers::WithinRel;

namespace {

// Two experts, D = I = 32. Expert e: every gate weight a_e, every up weight 1/32, every W2
// weight 0.5; so with x = 1: g = 32 a_e, u = 1, and o_d = 0.5 * 32 * act(g, 1) = 16 act(g, 1).
Mxfp4ExpertWeights hand_weights() {
  const int E = 2, D = 32, I = 32;
  std::vector<float> w1(std::size_t(E) * 2 * I * D), w2(std::size_t(E) * D * I, 0.5f);
  const float a[2] = {0.0625f, -0.0625f};
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < 2 * I; ++r)
      for (int d = 0; d < D; ++d) w1[(std::size_t(e) * 2 * I + r) * D + d] = r < I ? a[e] : 1.f / 32;
  return quantize_expert_weights(w1.data(), w2.data(), E, D, I);
}

reference::LayerOutputs run(Activation act, CombineWire wire, std::vector<int> ids, std::vector<float> weights,
                            int experts = 0) {
  static const Mxfp4ExpertWeights w = hand_weights();
  std::vector<std::uint16_t> x(32, formats::float_to_bf16(1.f));
  reference::LayerInputs in;
  in.weights = &w;
  in.activation = act;
  in.wire = wire;
  in.topk = int(ids.size());
  in.x = x.data();
  in.ids = ids.data();
  in.route_weights = weights.data();
  in.experts = experts;
  return reference::reference_layer(in, {0}, 2);
}

}  // namespace

TEST_CASE("reference layer, silu, by hand", "[reference]") {
  auto out = run({ActivationKind::silu}, CombineWire::bf16, {0, 1}, {0.25f, 0.75f});
  for (int d = 0; d < 32; ++d) {
    // 0.25 * 16 * silu(2) + 0.75 * 16 * silu(-2)
    CHECK_THAT(out.exact[d], WithinRel(4.185506495292238f, 1e-6f));
    // h = 1.7616 -> fp8 block (scale 2^-7): 1.75;  h = -0.2384 -> (2^-10): -0.234375;
    // 0.25 * 16 * 1.75 + 0.75 * 16 * -0.234375 = 7 - 2.8125
    CHECK(out.emulated[d] == 4.1875f);
  }
}

TEST_CASE("reference layer, situv2, by hand", "[reference]") {
  auto out = run({ActivationKind::situv2, 4.f, 25.f, 0.f}, CombineWire::bf16, {0, 1}, {0.25f, 0.75f});
  CHECK_THAT(out.exact[0], WithinRel(3.8663269054967757f, 1e-6f));
}

TEST_CASE("reference layer, fp8 combine wire, by hand", "[reference]") {
  auto out = run({ActivationKind::silu}, CombineWire::fp8_blockwise_1x32, {0, 1}, {0.25f, 0.75f});
  // wire: 7.0 stays 7.0 (scale 2^-6: 448); -2.8125 (scale 2^-7: -360) -> -352 -> -2.75
  CHECK(out.emulated[5] == 4.25f);
  CHECK_THAT(out.exact[5], WithinRel(4.185506495292238f, 1e-6f));
}

TEST_CASE("reference layer: -1 slots and ids out of range contribute nothing", "[reference]") {
  auto base = run({ActivationKind::silu}, CombineWire::bf16, {0, 1}, {0.25f, 0.75f});
  auto holes = run({ActivationKind::silu}, CombineWire::bf16, {0, -1, 1, 7, -5}, {0.25f, 9.f, 0.75f, 9.f, 9.f});
  CHECK(holes.exact == base.exact);
  CHECK(holes.emulated == base.emulated);
  // A group's experts may be fewer than the weights hold: ids past them are bad too.
  auto fewer = run({ActivationKind::silu}, CombineWire::bf16, {0, 1}, {0.25f, 0.75f}, 1);
  auto only0 = run({ActivationKind::silu}, CombineWire::bf16, {0, -1}, {0.25f, 0.75f});
  CHECK(fewer.exact == only0.exact);
  CHECK(fewer.emulated == only0.emulated);
  CHECK(fewer.exact != base.exact);
  auto none = run({ActivationKind::silu}, CombineWire::bf16, {-1, -1}, {1.f, 1.f});
  for (float v : none.exact) CHECK(v == 0.f);
  for (float v : none.emulated) CHECK(v == 0.f);
}

TEST_CASE("reference layer: an expert's pairs computed in blocks give what one at a time gives", "[reference]") {
  // Six tokens with different x, every slot on expert 0 or 1: blocks of four pairs and a rest of
  // two per expert, against each token alone (one pair per expert).
  static const Mxfp4ExpertWeights w = hand_weights();
  const int T = 6, K = 2;
  std::vector<std::uint16_t> x(T * 32);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < 32; ++d) x[t * 32 + d] = formats::float_to_bf16(0.25f * float((t * 7 + d * 3) % 11) - 1.f);
  std::vector<int> ids(T * K);
  std::vector<float> weights(T * K);
  for (int i = 0; i < T * K; ++i) ids[i] = i % 2, weights[i] = 0.125f * float(1 + i % 5);
  reference::LayerInputs in;
  in.weights = &w;
  in.activation = {ActivationKind::silu};
  in.topk = K;
  in.x = x.data();
  in.ids = ids.data();
  in.route_weights = weights.data();
  auto all = reference::reference_layer(in, {0, 1, 2, 3, 4, 5}, 1);
  for (std::int64_t t = 0; t < T; ++t) {
    auto one = reference::reference_layer(in, {t}, 1);
    for (int d = 0; d < 32; ++d) {
      CHECK(all.exact[t * 32 + d] == one.exact[d]);
      CHECK(all.emulated[t * 32 + d] == one.emulated[d]);
    }
  }
  double norm = 0;
  for (float v : all.exact) norm += double(v) * v;
  CHECK(norm > 0);  // the tokens' outputs are not all zero
}

TEST_CASE("reference layer: the emulated GEMMs sum as the path's matrix instructions do", "[reference]") {
  // x = (1, -1, s, ..., s), s = 1.875 * 2^-14: in an fp8 MMA step the 30 small products fall
  // below the 13 bits kept under the large ones and are lost, so the sums are 0, as they are
  // for x = (1, -1, 0, ..., 0) summed exactly; summed exactly, x's small values do count.
  static const Mxfp4ExpertWeights w = hand_weights();
  std::vector<std::uint16_t> x(32, formats::float_to_bf16(1.875f * std::ldexp(1.f, -14))), x1(32, 0);
  x[0] = x1[0] = formats::float_to_bf16(1.f);
  x[1] = x1[1] = formats::float_to_bf16(-1.f);
  std::vector<int> ids = {0, 1};
  std::vector<float> weights = {0.25f, 0.75f};
  auto layer = [&](const std::vector<std::uint16_t>& in_x, Accumulation acc) {
    reference::LayerInputs in;
    in.weights = &w;
    in.activation = {ActivationKind::silu};
    in.accumulation = acc;
    in.topk = 2;
    in.x = in_x.data();
    in.ids = ids.data();
    in.route_weights = weights.data();
    return reference::reference_layer(in, {0}, 1);
  };
  auto mma = layer(x, Accumulation::sm90_fp8_mma), one = layer(x1, Accumulation::exact);
  CHECK(mma.emulated == one.emulated);
  CHECK(layer(x, Accumulation::exact).emulated != one.emulated);
  CHECK(mma.exact != one.exact);  // the small values do count in the exact reference
  CHECK(mma.exact == layer(x, Accumulation::exact).exact);  // which the accumulation leaves alone
}

TEST_CASE("rel_l2", "[reference]") {
  float a[2] = {3, 4}, b[2] = {3, 4}, c[2] = {0, 0};
  CHECK(reference::rel_l2(a, b, 2) == 0.0);
  CHECK(reference::rel_l2(c, b, 2) == 1.0);
  float n[2] = {NAN, 4};
  CHECK(std::isnan(reference::rel_l2(n, b, 2)));
}

TEST_CASE("reference layer: h in one static scale from the activation's bound", "[reference]") {
  // SiTUv2 (4, 25): |h| < 100, so h is held as e4m3 times 2^-2 (100 / 2^-2 = 400 <= 448).
  const Activation act{ActivationKind::situv2, 4.f, 25.f, 0.f};
  CHECK(activation_bound(act) == 100.f);
  CHECK(formats::fp8_block_exponent(100.f) == -2);
  static const Mxfp4ExpertWeights w = hand_weights();
  std::vector<std::uint16_t> x(32, formats::float_to_bf16(1.f));
  std::vector<int> ids = {0, 1};
  std::vector<float> weights = {0.25f, 0.75f};
  reference::LayerInputs in;
  in.weights = &w, in.activation = act, in.topk = 2, in.x = x.data(), in.ids = ids.data();
  in.route_weights = weights.data(), in.h_static = true;
  const reference::LayerOutputs out = reference::reference_layer(in, {0}, 2);
  auto held = [](float h) { return formats::e4m3_to_float(formats::float_to_e4m3(h * 4.f)) / 4.f; };
  const float h0 = reference::situv2(2.f, 1.f, 4.f, 25.f), h1 = reference::situv2(-2.f, 1.f, 4.f, 25.f);
  // o_d = 16 h per expert (every W2 weight 0.5 over I = 32), each pair rounded to bf16 (the wire)
  const float y = formats::bf16_to_float(formats::float_to_bf16(0.25f * 16.f * held(h0))) +
                  formats::bf16_to_float(formats::float_to_bf16(0.75f * 16.f * held(h1)));
  for (int d = 0; d < 32; ++d) CHECK(out.emulated[d] == formats::bf16_to_float(formats::float_to_bf16(y)));

  // x = 1/128: g = 1/64 and u = 1/128, h about 1e-4: under 2^-9 x 2^-2 the static scale holds
  // it as 0, where a block scale of its own keeps it.
  std::vector<std::uint16_t> small(32, formats::float_to_bf16(1.f / 128));
  in.x = small.data();
  for (float y_static : reference::reference_layer(in, {0}, 2).emulated) CHECK(y_static == 0.f);
  in.h_static = false;
  for (float y_block : reference::reference_layer(in, {0}, 2).emulated) CHECK(y_block != 0.f);
  in.h_static = true;

  in.activation = {ActivationKind::silu};  // unbounded: no static scale
  CHECK_THROWS_WITH(reference::reference_layer(in, {0}, 2), Catch::Contains("bounded activation"));
}

TEST_CASE("reference layer: biases, by hand", "[reference]") {
  // The hand weights with expert e's b1 gate i = (e + 1) i / 64, up i = -i / 128 + e, b2 d =
  // (d - 3 e) / 16: with x = 1, g_i = 32 a_e + (e + 1) i / 64, u_i = 1 - i / 128 + e,
  // o_d = 0.5 sum_i act(g_i, u_i) + (d - 3 e) / 16, and y_d = 0.25 o_d(0) + 0.5 o_d(1). Each
  // expert's own biases, and route weights that do not sum to 1: b2 must come before the weight.
  Mxfp4ExpertWeights w = hand_weights();
  const int E = 2, D = 32, I = 32;
  w.b1.resize(E * 2 * I), w.b2.resize(E * D);
  for (int e = 0; e < E; ++e) {
    for (int i = 0; i < I; ++i)
      w.b1[e * 2 * I + i] = float((e + 1) * i) / 64, w.b1[e * 2 * I + I + i] = -float(i) / 128 + float(e);
    for (int d = 0; d < D; ++d) w.b2[e * D + d] = float(d - 3 * e) / 16;
  }
  std::vector<std::uint16_t> x(32, formats::float_to_bf16(1.f));
  std::vector<int> ids = {0, 1};
  std::vector<float> weights = {0.25f, 0.5f};
  reference::LayerInputs in;
  in.weights = &w, in.activation = {ActivationKind::silu}, in.topk = 2, in.x = x.data(), in.ids = ids.data();
  in.route_weights = weights.data();
  const reference::LayerOutputs out = reference::reference_layer(in, {0}, 2);
  const float a[2] = {0.0625f, -0.0625f};
  for (int d = 0; d < D; ++d) {
    double y = 0;
    for (int e = 0; e < E; ++e) {
      double o = 0;
      for (int i = 0; i < I; ++i)
        o += 0.5 * reference::silu(32 * a[e] + float((e + 1) * i) / 64, 1.f - float(i) / 128 + float(e));
      y += weights[e] * (o + (d - 3 * e) / 16.0);
    }
    CHECK_THAT(out.exact[d], WithinRel(float(y), 1e-5f));
    CHECK_THAT(out.emulated[d], WithinRel(float(y), 5e-2f));  // h in fp8 (3 mantissa bits), y bf16
  }
}

TEST_CASE("reference layer: at a padded shape the outputs are the model's", "[reference]") {
  // D 96 and I 64 padded to 128 and 192: zero rows and columns add nothing, x's padding is zero,
  // and each fp8 block of x and h either lies in the model's columns or is all padding.
  const int E = 2, D = 96, I = 64, T = 5, K = 2;
  const Mxfp4ExpertWeights w = test::normal_expert_weights(E, D, I, 3, 0.2f, true);
  std::mt19937 rng(4);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<std::uint16_t> x(T * D);
  for (auto& v : x) v = formats::float_to_bf16(n(rng));
  std::vector<int> ids = {0, 1, 1, 0, 0, -1, 1, 1, 0, 1};
  std::vector<float> weights = {0.5f, 0.5f, 0.25f, 0.75f, 1.f, 0.f, 0.6f, 0.4f, 0.3f, 0.7f};
  reference::LayerInputs in;
  in.weights = &w, in.activation = {ActivationKind::swiglu, 0.f, 0.f, 7.f, 1.702f, 1.f}, in.topk = K;
  in.x = x.data(), in.ids = ids.data(), in.route_weights = weights.data();
  const reference::LayerOutputs own = reference::reference_layer(in, {0, 1, 2, 3, 4}, 2);
  in.model_dim = 128, in.inter_dim = 192;
  const reference::LayerOutputs padded = reference::reference_layer(in, {0, 1, 2, 3, 4}, 2);
  REQUIRE(padded.exact.size() == std::size_t(T) * D);  // the model's width
  CHECK(padded.exact == own.exact);
  CHECK(padded.emulated == own.emulated);
  double norm = 0;
  for (float v : own.exact) norm += double(v) * v;
  CHECK(norm > 0);
  // Without the biases the outputs move: they count.
  Mxfp4ExpertWeights bare = w;
  bare.b1.clear(), bare.b2.clear();
  in.weights = &bare;
  CHECK(reference::reference_layer(in, {0, 1, 2, 3, 4}, 2).exact != own.exact);
}

TEST_CASE("reference layer: shared experts are rows of every token after its routed ones, by hand", "[reference][shared]") {
  const Mxfp4ExpertWeights w = hand_weights();
  const Mxfp4ExpertWeights routed = gather_experts(w, {0}), shared = gather_experts(w, {1});
  std::vector<std::uint16_t> x(32, formats::float_to_bf16(1.f));
  std::vector<int> ids = {0};
  std::vector<float> weights = {0.25f};
  reference::LayerInputs in;
  in.weights = &routed;
  in.activation = {ActivationKind::silu};
  in.topk = 1;
  in.x = x.data();
  in.ids = ids.data();
  in.route_weights = weights.data();
  in.shared = &shared;
  in.shared_scale = 0.75f;
  const auto out = reference::reference_layer(in, {0}, 2);
  for (int d = 0; d < 32; ++d) {  // as "silu, by hand": expert 0 with 0.25, expert 1 with 0.75
    CHECK_THAT(out.exact[d], WithinRel(4.185506495292238f, 1e-6f));
    CHECK(out.emulated[d] == 4.1875f);
  }
}

TEST_CASE("reference layer: shared experts give what the same experts as more routed slots give", "[reference][shared]") {
  // Random weights and routes; the shared experts appended as experts E.. and routed by hand as
  // each token's last slots: the same sums in the same order, so the same bits.
  std::mt19937_64 rng(5);
  const int E = 6, S = 2, K = 3, D = 64, I = 64, T = 5;
  const Mxfp4ExpertWeights all = test::normal_expert_weights(E + S, D, I, 5, 0.125f, true);
  std::vector<int> routed_ids(E), shared_ids(S);
  for (int e = 0; e < E; ++e) routed_ids[e] = e;
  for (int j = 0; j < S; ++j) shared_ids[j] = E + j;
  const Mxfp4ExpertWeights routed = gather_experts(all, routed_ids), shared = gather_experts(all, shared_ids);
  std::vector<std::uint16_t> x(T * D);
  std::normal_distribution<float> n01;
  for (auto& v : x) v = formats::float_to_bf16(n01(rng));
  std::vector<int> ids(T * K), wide_ids;
  std::vector<float> weights(T * K), wide_weights;
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < K; ++k) {
      ids[t * K + k] = t == 1 && k == 2 ? -1 : int(rng() % E);
      weights[t * K + k] = 0.1f + 0.2f * k;
      wide_ids.push_back(ids[t * K + k]), wide_weights.push_back(weights[t * K + k]);
    }
    for (int j = 0; j < S; ++j) wide_ids.push_back(E + j), wide_weights.push_back(1.5f);
  }
  for (Accumulation acc : {Accumulation::exact, Accumulation::sm90_fp8_mma}) {
    reference::LayerInputs in;
    in.activation = {ActivationKind::silu};
    in.x = x.data();
    in.x_block = in.h_block = acc == Accumulation::exact ? 32 : 64;
    in.accumulation = acc;
    in.weights = &routed, in.topk = K, in.ids = ids.data(), in.route_weights = weights.data();
    in.shared = &shared, in.shared_scale = 1.5f;
    const auto got = reference::reference_layer(in, {0, 1, 2, 3, 4}, 2);
    reference::LayerInputs widened = in;
    widened.shared = nullptr;
    widened.weights = &all, widened.topk = K + S, widened.ids = wide_ids.data(), widened.route_weights = wide_weights.data();
    const auto want = reference::reference_layer(widened, {0, 1, 2, 3, 4}, 2);
    CHECK(got.exact == want.exact);
    CHECK(got.emulated == want.emulated);
    CHECK(got.flip_reach == want.flip_reach);
    // and the shared experts count: without them the outputs differ everywhere that matters
    reference::LayerInputs none = in;
    none.shared = nullptr;
    CHECK(reference::rel_l2(reference::reference_layer(none, {0, 1, 2, 3, 4}, 2).exact.data(), got.exact.data(),
                            got.exact.size()) > 0.3);
  }
}

TEST_CASE("reference layer over nodes: another node's slots summed there, in bf16, at its first slot", "[reference]") {
  static const Mxfp4ExpertWeights w = hand_weights();
  const std::vector<std::uint16_t> x(32, formats::float_to_bf16(1.f));
  // Expert 0's row is 28 a unit of weight, expert 1's -3.75 (the by-hand case above): node 1's
  // sum 28 - 3.75 / 256 rounds to 28 in bf16, which slot 1's -28 then cancels.
  const std::vector<int> ids = {0, 0, 1, 0};
  const std::vector<float> weights = {1.f, -1.f, 1.f / 256, 0.f};
  auto emulated = [&](std::vector<int> slot_ids, const int* slot_nodes) {
    reference::LayerInputs in;
    const int home = 0;
    in.weights = &w;
    in.activation = {ActivationKind::silu};
    in.topk = 4;
    in.x = x.data();
    in.ids = slot_ids.data();
    in.route_weights = weights.data();
    in.slot_nodes = slot_nodes, in.home_nodes = &home;
    return reference::reference_layer(in, {0}, 1).emulated;
  };
  // Each slot alone: its row on the bf16 wire, exactly (one term is its own sum).
  std::vector<std::vector<float>> slot(4);
  for (int k = 0; k < 4; ++k) {
    std::vector<int> one(4, -1);
    one[k] = ids[k];
    slot[k] = emulated(one, nullptr);
  }
  auto bf16 = [](float v) { return formats::bf16_to_float(formats::float_to_bf16(v)); };
  const int nodes[4] = {1, 0, 1, 0};  // slots 0 and 2 on node 1, away from home (node 0)
  const std::vector<float> got = emulated(ids, nodes), flat = emulated(ids, nullptr);
  bool moved = false;
  for (int d = 0; d < 32; ++d) {
    float acc = bf16(slot[0][d] + slot[2][d]);
    acc += slot[1][d];
    acc += slot[3][d];
    CHECK(got[d] == bf16(acc));
    moved = moved || got[d] != flat[d];
    float in_order = slot[0][d];
    in_order += slot[1][d];
    in_order += slot[2][d];
    in_order += slot[3][d];
    CHECK(flat[d] == bf16(in_order));
  }
  INFO("the node's sum rounds to bf16 where the flat sum does not");
  CHECK(moved);
}
