// (gate, up) pairs that reach every branch of the activations: values from 1e-30 to 1e4 of both
// signs, the tanh series' edge (|g / 4| and |u / 25| at 1/4), where e^-g overflows and where the
// exponential's result leaves the normal range, zeros, infinities and NaN, then random values.
#pragma once
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace megamoe::test {

// g0, u0, g1, u1, ...
inline std::vector<float> activation_probe_pairs() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> one = {0.f, -0.f, inf, -inf, nan, 1e-30f, 1e-7f, 1e-3f, 0.1f, 0.5f, 1.f, 0.9999f, 1.0001f,
                            2.f, 4.f, 7.f, 10.f, 25.f, 40.f, 86.f, 87.f, 88.f, 89.f, 100.f, 176.f, 200.f, 1e4f};
  for (float edge : {1.f, 6.25f}) {
    float x = edge;
    for (int i = 0; i < 4; ++i) x = std::nextafter(x, 0.f);
    for (int i = 0; i < 8; ++i, x = std::nextafter(x, inf)) one.push_back(x);
  }
  const std::size_t n = one.size();
  for (std::size_t i = 0; i < n; ++i) one.push_back(-one[i]);
  std::vector<float> pairs;
  for (float g : one)
    for (float u : one) pairs.push_back(g), pairs.push_back(u);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-12, 5);
  while (pairs.size() < 2 * 65536) pairs.push_back((rng() & 1 ? -1.f : 1.f) * std::ldexp(mant(rng), exp(rng)));
  return pairs;
}

}  // namespace megamoe::test
