#include "weights/padded_weights.hpp"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe {

namespace {

// rows x cols elements of `from` (row stride cols) into the top-left of `to` (row stride to_cols).
template <class T>
void copy_block(const T* from, std::size_t rows, std::size_t cols, T* to, std::size_t to_cols) {
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(from + r * cols, cols, to + r * to_cols);
}

}  // namespace

Mxfp4ExpertWeights pad_expert_weights(const Mxfp4ExpertWeights& w, int model_dim, int inter_dim) {
  if (model_dim < w.model_dim || inter_dim < w.inter_dim)
    throw Error(fmt::format("megamoe: pad_expert_weights: {} x {} is smaller than the weights' {} x {}", model_dim,
                            inter_dim, w.model_dim, w.inter_dim));
  Mxfp4ExpertWeights p = Mxfp4ExpertWeights::zeros(w.experts, model_dim, inter_dim);
  const std::size_t D = w.model_dim, I = w.inter_dim, Dp = model_dim, Ip = inter_dim;
  for (std::size_t e = 0; e < std::size_t(w.experts); ++e) {
    for (std::size_t half = 0; half < 2; ++half) {  // gate rows, then up rows
      const std::size_t from = (e * 2 + half) * I, to = (e * 2 + half) * Ip;
      copy_block(w.w1_packed.data() + from * D / 2, I, D / 2, p.w1_packed.data() + to * Dp / 2, Dp / 2);
      copy_block(w.w1_scales.data() + from * D / 32, I, D / 32, p.w1_scales.data() + to * Dp / 32, Dp / 32);
    }
    copy_block(w.w2_packed.data() + e * D * I / 2, D, I / 2, p.w2_packed.data() + e * Dp * Ip / 2, Ip / 2);
    copy_block(w.w2_scales.data() + e * D * I / 32, D, I / 32, p.w2_scales.data() + e * Dp * Ip / 32, Ip / 32);
  }
  if (w.has_biases()) {
    p.b1.assign(w.experts * 2 * Ip, 0.f);
    p.b2.assign(w.experts * Dp, 0.f);
    copy_block(w.b1.data(), 2 * w.experts, I, p.b1.data(), Ip);  // each expert's gate row, then its up row
    copy_block(w.b2.data(), w.experts, D, p.b2.data(), Dp);
  }
  return p;
}

}  // namespace megamoe
