// CPU reference of the activations, in fp32 as docs/contract.md ("The call") defines them.
#pragma once
#include <cmath>

#include "megamoe/config.hpp"

namespace megamoe::reference {

inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
inline float silu(float g, float u) { return g * sigmoid(g) * u; }
inline float situv2(float g, float u, float beta, float linear_beta) {
  return beta * std::tanh(g / beta) * sigmoid(g) * (linear_beta * std::tanh(u / linear_beta));
}
inline float swiglu(float g, float u, float limit, float alpha, float up_offset) {
  g = std::fmin(g, limit);
  u = std::fmin(std::fmax(u, -limit), limit);
  return g * sigmoid(alpha * g) * (u + up_offset);
}

inline float activation(const Activation& a, float g, float u) {
  switch (a.kind) {
    case ActivationKind::silu: return silu(g, u);
    case ActivationKind::situv2: return situv2(g, u, a.beta, a.linear_beta);
    case ActivationKind::swiglu: return swiglu(g, u, a.limit, a.alpha, a.up_offset);
  }
  return NAN;
}

}  // namespace megamoe::reference
