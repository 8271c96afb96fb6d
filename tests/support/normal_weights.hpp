// Small expert weights for the CPU tests: N(0, sigma^2) values quantized to MXFP4, and (where
// asked) N(0, sigma^2) biases, drawn in that order from one generator.
#pragma once
#include <random>
#include <vector>

#include "megamoe/weights.hpp"

namespace megamoe::test {

inline Mxfp4ExpertWeights normal_expert_weights(int experts, int model_dim, int inter_dim, unsigned seed, float sigma,
                                                bool biases) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, sigma);
  std::vector<float> w1(std::size_t(experts) * 2 * inter_dim * model_dim), w2(std::size_t(experts) * model_dim * inter_dim);
  for (float& v : w1) v = n(rng);
  for (float& v : w2) v = n(rng);
  Mxfp4ExpertWeights w = quantize_expert_weights(w1.data(), w2.data(), experts, model_dim, inter_dim);
  if (biases) {
    w.b1.resize(std::size_t(experts) * 2 * inter_dim), w.b2.resize(std::size_t(experts) * model_dim);
    for (float& v : w.b1) v = n(rng);
    for (float& v : w.b2) v = n(rng);
  }
  return w;
}

}  // namespace megamoe::test
