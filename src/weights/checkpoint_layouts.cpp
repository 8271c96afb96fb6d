// A checkpoint's expert tensors in the layout it names, turned into the library's
// (Mxfp4ExpertWeights: W1 as halves): each layout's own joining function, with its pointers and
// biases checked first.
#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "megamoe/errors.hpp"
#include "megamoe/weights.hpp"

namespace megamoe {

namespace {

constexpr std::array<std::pair<CheckpointLayout, std::string_view>, 3> kNames = {{
    {CheckpointLayout::halves, "halves"},
    {CheckpointLayout::separate_gate_up, "separate_gate_up"},
    {CheckpointLayout::gpt_oss, "gpt_oss"},
}};

void need(const char* field, const void* p, CheckpointLayout layout) {
  if (p == nullptr)
    throw Error(fmt::format("megamoe: load_checkpoint: tensors.{} is null, expected a host array (layout {})", field,
                            to_string(layout)));
}

void refuse(const char* field, const void* p, CheckpointLayout layout) {
  if (p != nullptr)
    throw Error(fmt::format("megamoe: load_checkpoint: tensors.{} is given with layout {}, expected null (only "
                            "separate_gate_up stores up apart; W1 holds it otherwise)",
                            field, to_string(layout)));
}

// The halves layout is the library's own: the bytes as they are.
Mxfp4ExpertWeights copy_halves(int experts, int model_dim, int inter_dim, const CheckpointTensors& t) {
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(experts, model_dim, inter_dim);
  std::copy_n(t.w1, w.w1_packed.size(), w.w1_packed.begin());
  std::copy_n(t.w1_scales, w.w1_scales.size(), w.w1_scales.begin());
  std::copy_n(t.w2, w.w2_packed.size(), w.w2_packed.begin());
  std::copy_n(t.w2_scales, w.w2_scales.size(), w.w2_scales.begin());
  return w;
}

// Biases stored gate then up, as the library keeps them.
void copy_biases(Mxfp4ExpertWeights& w, const CheckpointTensors& t) {
  if (t.b1 == nullptr) return;
  w.b1.assign(t.b1, t.b1 + std::size_t(w.experts) * 2 * w.inter_dim);
  w.b2.assign(t.b2, t.b2 + std::size_t(w.experts) * w.model_dim);
}

}  // namespace

std::string_view to_string(CheckpointLayout layout) {
  for (auto [l, name] : kNames)
    if (l == layout) return name;
  return "?";
}

CheckpointLayout checkpoint_layout_from_name(std::string_view name) {
  std::string known;
  for (auto [l, n] : kNames) {
    if (n == name) return l;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  throw Error(fmt::format("megamoe: checkpoint layout \"{}\", expected one of {}", name, known));
}

Mxfp4ExpertWeights load_checkpoint(CheckpointLayout layout, int experts, int model_dim, int inter_dim,
                                   const CheckpointTensors& t) {
  for (auto [field, p] : {std::pair<const char*, const void*>{"w1", t.w1}, {"w1_scales", t.w1_scales}, {"w2", t.w2},
                          {"w2_scales", t.w2_scales}})
    need(field, p, layout);
  if ((t.b1 == nullptr) != (t.b2 == nullptr))
    throw Error(fmt::format("megamoe: load_checkpoint: tensors.{} is given and tensors.{} is null, expected both "
                            "biases or neither",
                            t.b1 ? "b1" : "b2", t.b1 ? "b2" : "b1"));
  const bool apart = layout == CheckpointLayout::separate_gate_up;
  for (auto [field, p] : {std::pair<const char*, const void*>{"up", t.up}, {"up_scales", t.up_scales}})
    apart ? need(field, p, layout) : refuse(field, p, layout);
  Mxfp4ExpertWeights w;
  switch (layout) {
    case CheckpointLayout::halves:
      w = copy_halves(experts, model_dim, inter_dim, t);
      copy_biases(w, t);
      break;
    case CheckpointLayout::separate_gate_up:
      w = join_gate_up(experts, model_dim, inter_dim, t.w1, t.w1_scales, t.up, t.up_scales, t.w2, t.w2_scales);
      copy_biases(w, t);
      break;
    case CheckpointLayout::gpt_oss:
      w = from_interleaved_gate_up(experts, model_dim, inter_dim, t.w1, t.w1_scales, t.b1, t.w2, t.w2_scales, t.b2);
      break;
  }
  w.check();  // the biases' values
  return w;
}

}  // namespace megamoe
