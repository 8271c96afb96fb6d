// A checkpoint's MXFP4 tensors in the layout it names, turned into the library's
// (Mxfp4ExpertWeights: W1 as halves): its pointers checked, then checkpoint_to_halves.
#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "megamoe/errors.hpp"
#include "megamoe/weights.hpp"
#include "weights/checkpoint_arrays.hpp"

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
    known += fmt::format("{}'{}'", known.empty() ? "" : " or ", n);
  }
  throw InputError("layout", fmt::format("'{}'", name), known);
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
  const std::int64_t E = experts, D = model_dim, I = inter_dim, rows = apart ? I : 2 * I;
  auto view = [](const char* field, const void* p, std::vector<std::int64_t> shape, int bytes = 1) {
    return HostArrayView{fmt::format("tensors.{}", field), p, std::move(shape), bytes};
  };
  CheckpointArrays a;
  a.w1 = view("w1", t.w1, {E, rows, D / 2}), a.w1_scales = view("w1_scales", t.w1_scales, {E, rows, D / 32});
  a.up = view("up", t.up, {E, I, D / 2}), a.up_scales = view("up_scales", t.up_scales, {E, I, D / 32});
  a.w2 = view("w2", t.w2, {E, D, I / 2}), a.w2_scales = view("w2_scales", t.w2_scales, {E, D, I / 32});
  a.b1 = view("b1", t.b1, {E, 2 * I}, 4), a.b2 = view("b2", t.b2, {E, D}, 4);
  Mxfp4ExpertWeights w =
      weights_from_halves(checkpoint_to_halves(layout, experts, model_dim, inter_dim, a), experts, model_dim, inter_dim);
  w.check();  // the biases' values
  return w;
}

}  // namespace megamoe
