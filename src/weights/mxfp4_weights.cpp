// MXFP4 expert weights: allocation, shape checks, quantization from fp32 / bf16.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "config/path_requirements.hpp"
#include "formats/formats.hpp"
#include "megamoe/errors.hpp"
#include "megamoe/weights.hpp"
#include "weights/checkpoint_arrays.hpp"

namespace megamoe {

namespace {
struct Sizes {
  std::size_t w1_packed, w1_scales, w2_packed, w2_scales;
};
Sizes sizes(int e, int d, int i) {
  std::size_t E = e, D = d, I = i;
  return {E * 2 * I * D / 2, E * 2 * I * D / 32, E * D * I / 2, E * D * I / 32};
}
void check_dims(int experts, int model_dim, int inter_dim) {
  if (experts <= 0) throw Error(fmt::format("megamoe: weights: experts = {}, expected > 0", experts));
  // Any MXFP4 tensor splits K into blocks of kMxBlock; a kernel path whose multiple is larger
  // runs the weights padded up to it (prepare_weights, config/path_requirements.hpp).
  for (auto [field, v] : {std::pair{"model_dim", model_dim}, std::pair{"inter_dim", inter_dim}})
    if (v <= 0 || v % kMxBlock)
      throw Error(fmt::format("megamoe: weights: {} = {}, expected a positive multiple of {} (MXFP4 blocks)", field, v,
                              kMxBlock));
}
}  // namespace

Mxfp4ExpertWeights Mxfp4ExpertWeights::zeros(int experts, int model_dim, int inter_dim) {
  check_dims(experts, model_dim, inter_dim);
  Sizes s = sizes(experts, model_dim, inter_dim);
  Mxfp4ExpertWeights w;
  w.experts = experts, w.model_dim = model_dim, w.inter_dim = inter_dim;
  w.w1_packed.assign(s.w1_packed, 0), w.w1_scales.assign(s.w1_scales, 0);
  w.w2_packed.assign(s.w2_packed, 0), w.w2_scales.assign(s.w2_scales, 0);
  return w;
}

void Mxfp4ExpertWeights::check() const {
  check_dims(experts, model_dim, inter_dim);
  Sizes s = sizes(experts, model_dim, inter_dim);
  auto field = [&](const char* name, std::size_t got, std::size_t want, const char* shape) {
    if (got != want)
      throw Error(fmt::format("megamoe: weights: {} has {} bytes, expected {} ({} with experts={}, model_dim={}, "
                              "inter_dim={})",
                              name, got, want, shape, experts, model_dim, inter_dim));
  };
  field("w1_packed", w1_packed.size(), s.w1_packed, "[experts][2*inter_dim][model_dim/2]");
  field("w1_scales", w1_scales.size(), s.w1_scales, "[experts][2*inter_dim][model_dim/32]");
  field("w2_packed", w2_packed.size(), s.w2_packed, "[experts][model_dim][inter_dim/2]");
  field("w2_scales", w2_scales.size(), s.w2_scales, "[experts][model_dim][inter_dim/32]");
  if (!has_biases()) return;
  const std::size_t E = experts;
  auto bias = [&](const char* name, std::size_t got, std::size_t want, const char* shape) {
    if (got != want)
      throw Error(fmt::format("megamoe: weights: {} has {} floats, expected {} ({} with experts={}, model_dim={}, "
                              "inter_dim={}; biases come both or neither)",
                              name, got, want, shape, experts, model_dim, inter_dim));
  };
  bias("b1", b1.size(), E * 2 * inter_dim, "[experts][2*inter_dim]");
  bias("b2", b2.size(), E * model_dim, "[experts][model_dim]");
  for (auto [name, b] : {std::pair{"b1", &b1}, std::pair{"b2", &b2}}) {
    auto bad = std::find_if(b->begin(), b->end(), [](float v) { return !std::isfinite(v); });
    if (bad != b->end())
      throw Error(fmt::format("megamoe: weights: {}[{}] = {}, expected a finite bias", name, bad - b->begin(), *bad));
  }
}

Mxfp4ExpertWeights gather_experts(const Mxfp4ExpertWeights& w, const std::vector<int>& experts) {
  for (std::size_t i = 0; i < experts.size(); ++i)
    if (experts[i] < 0 || experts[i] >= w.experts)
      throw Error(fmt::format("megamoe: gather_experts: experts[{}] = {}, expected 0..{} (the weights' experts)", i,
                              experts[i], w.experts - 1));
  Mxfp4ExpertWeights out = Mxfp4ExpertWeights::zeros(int(experts.size()), w.model_dim, w.inter_dim);
  auto gather = [&](const auto& from, auto& to) {
    const std::size_t per = from.size() / std::size_t(w.experts);
    to.resize(per * experts.size());
    for (std::size_t i = 0; i < experts.size(); ++i)
      std::copy_n(from.begin() + std::size_t(experts[i]) * per, per, to.begin() + i * per);
  };
  gather(w.w1_packed, out.w1_packed);
  gather(w.w1_scales, out.w1_scales);
  gather(w.w2_packed, out.w2_packed);
  gather(w.w2_scales, out.w2_scales);
  if (w.has_biases()) gather(w.b1, out.b1), gather(w.b2, out.b2);
  return out;
}

Mxfp4ExpertWeights append_experts(const Mxfp4ExpertWeights& a, const Mxfp4ExpertWeights& b) {
  if (a.model_dim != b.model_dim || a.inter_dim != b.inter_dim || a.has_biases() != b.has_biases())
    throw Error(fmt::format("megamoe: append_experts: experts of {} x {} ({} biases) and of {} x {} ({} biases), "
                            "expected one shape",
                            a.model_dim, a.inter_dim, a.has_biases() ? "with" : "no", b.model_dim, b.inter_dim,
                            b.has_biases() ? "with" : "no"));
  Mxfp4ExpertWeights out = Mxfp4ExpertWeights::zeros(a.experts + b.experts, a.model_dim, a.inter_dim);
  auto join = [](const auto& x, const auto& y, auto& to) {
    to.assign(x.begin(), x.end());
    to.insert(to.end(), y.begin(), y.end());
  };
  join(a.w1_packed, b.w1_packed, out.w1_packed);
  join(a.w1_scales, b.w1_scales, out.w1_scales);
  join(a.w2_packed, b.w2_packed, out.w2_packed);
  join(a.w2_scales, b.w2_scales, out.w2_scales);
  if (a.has_biases()) join(a.b1, b.b1, out.b1), join(a.b2, b.b2, out.b2);
  return out;
}

Mxfp4ExpertWeights join_gate_up(int experts, int model_dim, int inter_dim, const std::uint8_t* gate_packed,
                                const std::uint8_t* gate_scales, const std::uint8_t* up_packed,
                                const std::uint8_t* up_scales, const std::uint8_t* w2_packed,
                                const std::uint8_t* w2_scales) {
  check_dims(experts, model_dim, inter_dim);
  const std::int64_t E = experts, D = model_dim, I = inter_dim;
  CheckpointArrays a;
  a.w1 = {"gate_packed", gate_packed, {E, I, D / 2}}, a.w1_scales = {"gate_scales", gate_scales, {E, I, D / 32}};
  a.up = {"up_packed", up_packed, {E, I, D / 2}}, a.up_scales = {"up_scales", up_scales, {E, I, D / 32}};
  a.w2 = {"w2_packed", w2_packed, {E, D, I / 2}}, a.w2_scales = {"w2_scales", w2_scales, {E, D, I / 32}};
  return weights_from_halves(checkpoint_to_halves(CheckpointLayout::separate_gate_up, experts, model_dim, inter_dim, a),
                             experts, model_dim, inter_dim);
}

Mxfp4ExpertWeights from_interleaved_gate_up(int experts, int model_dim, int inter_dim,
                                            const std::uint8_t* gate_up_packed, const std::uint8_t* gate_up_scales,
                                            const float* gate_up_bias, const std::uint8_t* down_packed,
                                            const std::uint8_t* down_scales, const float* down_bias) {
  if ((gate_up_bias == nullptr) != (down_bias == nullptr))
    throw Error(fmt::format("megamoe: weights: {} is null and {} is given, expected both biases or neither",
                            gate_up_bias ? "down_bias" : "gate_up_bias", gate_up_bias ? "gate_up_bias" : "down_bias"));
  check_dims(experts, model_dim, inter_dim);
  const std::int64_t E = experts, D = model_dim, I = inter_dim;
  CheckpointArrays a;
  a.w1 = {"gate_up_packed", gate_up_packed, {E, 2 * I, D / 2}};
  a.w1_scales = {"gate_up_scales", gate_up_scales, {E, 2 * I, D / 32}};
  a.w2 = {"down_packed", down_packed, {E, D, I / 2}}, a.w2_scales = {"down_scales", down_scales, {E, D, I / 32}};
  a.b1 = {"gate_up_bias", gate_up_bias, {E, 2 * I}, 4}, a.b2 = {"down_bias", down_bias, {E, D}, 4};
  return weights_from_halves(checkpoint_to_halves(CheckpointLayout::gpt_oss, experts, model_dim, inter_dim, a), experts,
                             model_dim, inter_dim);
}

Mxfp4ExpertWeights quantize_expert_weights(const float* w1, const float* w2, int experts, int model_dim,
                                           int inter_dim) {
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(experts, model_dim, inter_dim);
  // Rows are contiguous along K in both tensors, so each is one long run of 32-value blocks.
  formats::quantize_mxfp4(w1, std::size_t(experts) * 2 * inter_dim * model_dim, w.w1_packed.data(),
                          w.w1_scales.data());
  formats::quantize_mxfp4(w2, std::size_t(experts) * model_dim * inter_dim, w.w2_packed.data(),
                          w.w2_scales.data());
  return w;
}

Mxfp4ExpertWeights quantize_expert_weights_bf16(const std::uint16_t* w1, const std::uint16_t* w2, int experts,
                                                int model_dim, int inter_dim) {
  check_dims(experts, model_dim, inter_dim);
  auto widen = [](const std::uint16_t* p, std::size_t n) {
    std::vector<float> f(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = formats::bf16_to_float(p[i]);
    return f;
  };
  std::vector<float> f1 = widen(w1, std::size_t(experts) * 2 * inter_dim * model_dim);
  std::vector<float> f2 = widen(w2, std::size_t(experts) * model_dim * inter_dim);
  return quantize_expert_weights(f1.data(), f2.data(), experts, model_dim, inter_dim);
}

}  // namespace megamoe
