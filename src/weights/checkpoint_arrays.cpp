// Each checkpoint layout's shapes, and its arrays turned into the library's halves: rows joined
// (separate_gate_up), rows de-interleaved (gpt_oss), dense gpt_oss transposed from x @ W first.
#include "weights/checkpoint_arrays.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "megamoe/errors.hpp"

namespace megamoe {

namespace {

using Shape = std::vector<std::int64_t>;

// The shape a layout gives an array, another shape of the same bytes it may come as, and what the
// checkpoint calls it.
struct Expected {
  Shape shape, same_bytes;
  std::string what;
};

std::string dims(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::size_t elements(const Shape& s) {
  std::size_t n = 1;
  for (std::int64_t d : s) n *= std::size_t(d);
  return n;
}

void check_dims(int experts, int model_dim, int inter_dim) {
  if (experts <= 0) throw Error(fmt::format("megamoe: weights: experts = {}, expected > 0", experts));
  for (auto [field, v] : {std::pair{"model_dim", model_dim}, std::pair{"inter_dim", inter_dim}})
    if (v <= 0 || v % 32)
      throw Error(fmt::format("megamoe: weights: {} = {}, expected a positive multiple of 32 (MXFP4 blocks)", field, v));
}

// The four weight arrays' shapes of `layout` (biases apart), MXFP4 or dense of `E` experts.
struct LayoutShapes {
  Expected w1, w1_scales, up, up_scales, w2, w2_scales;
};

LayoutShapes layout_shapes(CheckpointLayout layout, bool mxfp4, std::int64_t E, std::int64_t D, std::int64_t I) {
  LayoutShapes s;
  const std::int64_t dk = mxfp4 ? D / 2 : D, ik = mxfp4 ? I / 2 : I;
  s.w2 = {{E, D, ik}, {}, ""};
  s.w2_scales = {{E, D, I / 32}, {}, ""};
  switch (layout) {
    case CheckpointLayout::halves:
      s.w1 = {{E, 2 * I, dk}, {}, ""};
      s.w1_scales = {{E, 2 * I, D / 32}, {}, ""};
      break;
    case CheckpointLayout::separate_gate_up:
      s.w1 = {{E, I, dk}, {}, "the gate's rows: experts, inter_dim rows"};
      s.up = {{E, I, dk}, {}, "the up's rows: experts, inter_dim rows"};
      s.w1_scales = {{E, I, D / 32}, {}, "the gate's scales"};
      s.up_scales = {{E, I, D / 32}, {}, "the up's scales"};
      break;
    case CheckpointLayout::gpt_oss:
      if (mxfp4) {
        s.w1 = {{E, 2 * I, dk}, {E, 2 * I, D / 32, 16}, "gate_up_proj_blocks"};
        s.w1_scales = {{E, 2 * I, D / 32}, {}, "gate_up_proj_scales"};
        s.w2 = {{E, D, ik}, {E, D, I / 32, 16}, "down_proj_blocks"};
        s.w2_scales = {{E, D, I / 32}, {}, "down_proj_scales"};
      } else {
        const char* held = "as transformers holds it: [experts, in, out], for dense weights";
        s.w1 = {{E, D, 2 * I}, {}, fmt::format("GptOssExperts.gate_up_proj, {}", held)};
        s.w2 = {{E, I, D}, {}, fmt::format("GptOssExperts.down_proj, {}", held)};
      }
      break;
  }
  return s;
}

std::string with_layout(std::string expected, CheckpointLayout layout) {
  return layout == CheckpointLayout::halves ? expected
                                            : fmt::format("{} with layout='{}'", expected, to_string(layout));
}

void check_shape(const HostArrayView& a, const Expected& e, CheckpointLayout layout) {
  if (a.shape == e.shape || (!e.same_bytes.empty() && a.shape == e.same_bytes)) return;
  std::string expected = dims(e.shape);
  if (!e.same_bytes.empty())
    expected = fmt::format("{} ({}) or {}", dims(e.same_bytes), e.what, dims(e.shape));
  else if (!e.what.empty())
    expected += fmt::format(" ({})", e.what);
  throw InputError(a.name, "shape " + dims(a.shape), with_layout(expected, layout));
}

// An array with another array's shape: most likely the arguments' order (blocks and scales swapped).
void refuse_misplaced(const std::vector<std::pair<const HostArrayView*, const Expected*>>& weights) {
  for (auto [a, e] : weights) {
    if (!a->given() || a->shape == e->shape) continue;
    const std::pair<const HostArrayView*, const Expected*>* match = nullptr;
    int matches = 0;
    for (auto& other : weights)
      if (other.first != a && other.second->shape == a->shape) match = &other, ++matches;
    if (matches == 1)
      throw InputError(a->name, fmt::format("shape {}, the shape of {}", dims(a->shape), match->first->name),
                       fmt::format("{}: the packed blocks go in w1 and w2, their scales in w1_scales and w2_scales",
                                   dims(e->shape)));
  }
}

void check_given(const HostArrayView& a, bool needed, CheckpointLayout layout, const std::string& why) {
  if (a.given() == needed) return;
  if (needed) throw InputError(a.name, "not given", fmt::format("an array with layout='{}'", to_string(layout)));
  throw InputError(a.name, "given", fmt::format("none with layout='{}' ({})", to_string(layout), why));
}

void check_element_bytes(const HostArrayView& a, bool mxfp4, int dense_bytes) {
  if (mxfp4 && a.element_bytes != 1)
    throw InputError(a.name, fmt::format("elements of {} bytes", a.element_bytes),
                     "bytes (uint8): MXFP4 values two a byte, e8m0 scales one a byte");
  if (!mxfp4 && a.element_bytes != dense_bytes)
    throw InputError(a.name, fmt::format("elements of {} bytes", a.element_bytes),
                     fmt::format("{} bytes, as w1's (float32 or bfloat16 alike)", dense_bytes));
}

std::vector<std::uint8_t> bytes_of(const HostArrayView& a) {
  const auto* p = static_cast<const std::uint8_t*>(a.data);
  return {p, p + elements(a.shape) * std::size_t(a.element_bytes)};
}

// Each expert's rows of `first`, then its rows of `second` (rows of row_bytes, `rows` a part).
std::vector<std::uint8_t> join_rows(const void* first, const void* second, std::size_t experts, std::size_t rows,
                                    std::size_t row_bytes) {
  const auto* a = static_cast<const std::uint8_t*>(first);
  const auto* b = static_cast<const std::uint8_t*>(second);
  const std::size_t part = rows * row_bytes;
  std::vector<std::uint8_t> out(experts * 2 * part);
  for (std::size_t e = 0; e < experts; ++e) {
    std::memcpy(out.data() + e * 2 * part, a + e * part, part);
    std::memcpy(out.data() + e * 2 * part + part, b + e * part, part);
  }
  return out;
}

// Row 2i of an expert (gate i) to row i, row 2i+1 (up i) to row half + i.
std::vector<std::uint8_t> deinterleave_rows(const std::uint8_t* in, std::size_t experts, std::size_t half,
                                            std::size_t row_bytes) {
  std::vector<std::uint8_t> out(experts * 2 * half * row_bytes);
  for (std::size_t e = 0; e < experts; ++e)
    for (std::size_t r = 0; r < 2 * half; ++r) {
      const std::size_t from = e * 2 * half + r, to = e * 2 * half + (r % 2) * half + r / 2;
      std::memcpy(out.data() + to * row_bytes, in + from * row_bytes, row_bytes);
    }
  return out;
}

// [E][R][C] elements of type T as [E][C][R], in tiles of 32 x 32 so both sides stay in cache.
template <class T>
void transpose_typed(const T* in, T* out, std::size_t E, std::size_t R, std::size_t C) {
  constexpr std::size_t kTile = 32;
  for (std::size_t e = 0; e < E; ++e)
    for (std::size_t r0 = 0; r0 < R; r0 += kTile)
      for (std::size_t c0 = 0; c0 < C; c0 += kTile)
        for (std::size_t r = r0; r < std::min(R, r0 + kTile); ++r)
          for (std::size_t c = c0; c < std::min(C, c0 + kTile); ++c)
            out[(e * C + c) * R + r] = in[(e * R + r) * C + c];
}

// [E][R][C] elements of n bytes (4: fp32, 2: bf16) as [E][C][R].
std::vector<std::uint8_t> transpose_experts(const void* data, std::size_t E, std::size_t R, std::size_t C,
                                            std::size_t n) {
  std::vector<std::uint8_t> out(E * R * C * n);
  if (n == 4)
    transpose_typed(static_cast<const std::uint32_t*>(data), reinterpret_cast<std::uint32_t*>(out.data()), E, R, C);
  else
    transpose_typed(static_cast<const std::uint16_t*>(data), reinterpret_cast<std::uint16_t*>(out.data()), E, R, C);
  return out;
}

std::vector<float> floats_of(const std::vector<std::uint8_t>& b) {
  std::vector<float> out(b.size() / 4);
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

void check_biases(CheckpointLayout layout, std::int64_t E, std::int64_t D, std::int64_t I, const CheckpointArrays& a) {
  const bool pair = a.up_b1.given();
  if (pair && !a.b1.given())
    throw InputError(a.up_b1.name, "given", fmt::format("with {} (the gate's bias, beside the up's)", a.b1.name));
  if (a.b1.given() != a.b2.given())
    throw InputError(a.b1.given() ? a.b2.name : a.b1.name, "not given",
                     fmt::format("both biases or neither ({} is given)", a.b1.given() ? a.b1.name : a.b2.name));
  if (pair && layout != CheckpointLayout::separate_gate_up)
    throw InputError(a.up_b1.name, "given", with_layout("none: b1 holds gate then up", layout));
  if (!a.b1.given()) return;
  const bool gpt = layout == CheckpointLayout::gpt_oss;
  for (const HostArrayView* b : {&a.b1, &a.up_b1, &a.b2})
    if (b->given() && b->element_bytes != 4)
      throw InputError(b->name, fmt::format("elements of {} bytes", b->element_bytes), "float32");
  check_shape(a.b1, {pair ? Shape{E, I} : Shape{E, 2 * I}, {}, gpt ? "gate_up_proj_bias" : ""}, layout);
  if (pair) check_shape(a.up_b1, {{E, I}, {}, ""}, layout);
  check_shape(a.b2, {{E, D}, {}, gpt ? "down_proj_bias" : ""}, layout);
}

// The biases in the library's layout, their shapes checked already: b1 gate then up.
void take_biases(CheckpointLayout layout, std::int64_t E, std::int64_t I, const CheckpointArrays& a, HalvesArrays& out) {
  if (!a.b1.given()) return;
  if (a.up_b1.given())
    out.b1 = floats_of(join_rows(a.b1.data, a.up_b1.data, std::size_t(E), 1, std::size_t(I) * 4));
  else if (layout == CheckpointLayout::gpt_oss)
    out.b1 = floats_of(deinterleave_rows(static_cast<const std::uint8_t*>(a.b1.data), std::size_t(E), std::size_t(I), 4));
  else
    out.b1 = floats_of(bytes_of(a.b1));
  out.b2 = floats_of(bytes_of(a.b2));
}

// The weights' bytes in the library's layout, the arrays' shapes checked already.
void join_weights(CheckpointLayout layout, std::int64_t E, std::int64_t D, std::int64_t I, const CheckpointArrays& a,
                  HalvesArrays& out) {
  const std::size_t n = std::size_t(out.element_bytes);
  const std::size_t w1_row = out.mxfp4 ? std::size_t(D) / 2 : std::size_t(D) * n, scale_row = std::size_t(D) / 32;
  switch (layout) {
    case CheckpointLayout::halves:
      out.w1 = bytes_of(a.w1);
      if (out.mxfp4) out.w1_scales = bytes_of(a.w1_scales);
      break;
    case CheckpointLayout::separate_gate_up:
      out.w1 = join_rows(a.w1.data, a.up.data, std::size_t(E), std::size_t(I), w1_row);
      if (out.mxfp4) out.w1_scales = join_rows(a.w1_scales.data, a.up_scales.data, std::size_t(E), std::size_t(I), scale_row);
      break;
    case CheckpointLayout::gpt_oss:
      if (out.mxfp4) {
        out.w1 = deinterleave_rows(static_cast<const std::uint8_t*>(a.w1.data), std::size_t(E), std::size_t(I), w1_row);
        out.w1_scales = deinterleave_rows(static_cast<const std::uint8_t*>(a.w1_scales.data), std::size_t(E),
                                          std::size_t(I), scale_row);
      } else {  // x @ W: [E][D][2I] to rows [E][2I][D], then gate and up apart
        const std::vector<std::uint8_t> rows = transpose_experts(a.w1.data, std::size_t(E), std::size_t(D), 2 * std::size_t(I), n);
        out.w1 = deinterleave_rows(rows.data(), std::size_t(E), std::size_t(I), w1_row);
      }
      break;
  }
  if (layout == CheckpointLayout::gpt_oss && !out.mxfp4)
    out.w2 = transpose_experts(a.w2.data, std::size_t(E), std::size_t(I), std::size_t(D), n);
  else
    out.w2 = bytes_of(a.w2);
  if (out.mxfp4) out.w2_scales = bytes_of(a.w2_scales);
}

}  // namespace

CheckpointForm check_checkpoint(CheckpointLayout layout, int experts, int model_dim, int inter_dim,
                                const CheckpointArrays& a) {
  check_dims(experts, model_dim, inter_dim);
  const std::int64_t E = experts, D = model_dim, I = inter_dim;
  if (!a.w1.given()) throw InputError(a.w1.name, "not given", "W1's array");
  if (!a.w2.given()) throw InputError(a.w2.name, "not given", "W2's array");
  if (a.w1_scales.given() != a.w2_scales.given())
    throw InputError(a.w1_scales.name + ", " + a.w2_scales.name, "one given",
                     "both (MXFP4) or neither (dense weights)");
  CheckpointForm out;
  out.mxfp4 = a.w1_scales.given();
  out.element_bytes = out.mxfp4 ? 1 : a.w1.element_bytes;
  if (!out.mxfp4 && out.element_bytes != 4 && out.element_bytes != 2)
    throw InputError(a.w1.name, fmt::format("elements of {} bytes", out.element_bytes),
                     "float32 or bfloat16 (dense weights), or bytes with their scales (MXFP4)");
  const bool apart = layout == CheckpointLayout::separate_gate_up;
  check_given(a.up, apart, layout, "only separate_gate_up stores up apart; W1 holds it otherwise");
  check_given(a.up_scales, apart && out.mxfp4, layout,
              apart ? "dense weights have no scales" : "only separate_gate_up stores up apart");
  for (const HostArrayView* w : {&a.w1, &a.up, &a.w2, &a.w1_scales, &a.up_scales, &a.w2_scales})
    if (w->given()) check_element_bytes(*w, out.mxfp4 || w == &a.w1_scales || w == &a.up_scales || w == &a.w2_scales,
                                        out.element_bytes);

  const LayoutShapes s = layout_shapes(layout, out.mxfp4, E, D, I);
  if (layout == CheckpointLayout::halves && a.w1.shape.size() == 4 && a.w1.shape[3] == 16)
    throw InputError(a.w1.name, "shape " + dims(a.w1.shape),
                     fmt::format("{} with layout='halves': a 4-D [E, N, K/32, 16] tensor is gpt-oss's *_blocks "
                                 "layout (gate and up interleaved by row): pass layout='gpt_oss'",
                                 dims(s.w1.shape)));
  if (out.mxfp4)  // where two arrays' shapes are alike (gate's and up's), neither is named
    refuse_misplaced({{&a.w1, &s.w1}, {&a.up, &s.up}, {&a.w2, &s.w2}, {&a.w1_scales, &s.w1_scales},
                      {&a.up_scales, &s.up_scales}, {&a.w2_scales, &s.w2_scales}});
  check_shape(a.w1, s.w1, layout);
  if (apart) check_shape(a.up, s.up, layout);
  check_shape(a.w2, s.w2, layout);
  if (out.mxfp4) {
    check_shape(a.w1_scales, s.w1_scales, layout);
    if (apart) check_shape(a.up_scales, s.up_scales, layout);
    check_shape(a.w2_scales, s.w2_scales, layout);
  }
  check_biases(layout, E, D, I, a);
  return out;
}

HalvesArrays checkpoint_to_halves(CheckpointLayout layout, int experts, int model_dim, int inter_dim,
                                  const CheckpointArrays& a) {
  const CheckpointForm form = check_checkpoint(layout, experts, model_dim, inter_dim, a);
  HalvesArrays out;
  out.mxfp4 = form.mxfp4, out.element_bytes = form.element_bytes;
  take_biases(layout, experts, inter_dim, a, out);
  join_weights(layout, experts, model_dim, inter_dim, a, out);
  return out;
}

Mxfp4ExpertWeights weights_from_halves(HalvesArrays h, int experts, int model_dim, int inter_dim) {
  if (!h.mxfp4) throw Error("megamoe: weights_from_halves: dense arrays, expected MXFP4 ones (quantize them first)");
  Mxfp4ExpertWeights w;
  w.experts = experts, w.model_dim = model_dim, w.inter_dim = inter_dim;
  w.w1_packed = std::move(h.w1), w.w1_scales = std::move(h.w1_scales);
  w.w2_packed = std::move(h.w2), w.w2_scales = std::move(h.w2_scales);
  w.b1 = std::move(h.b1), w.b2 = std::move(h.b2);
  return w;
}

}  // namespace megamoe
