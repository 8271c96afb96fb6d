// The activations act(gate, up) of GEMM1's two halves. Each is a type with one static
// apply(); parameters come from a Params type rendered from the config, so that a kernel is
// specialised on them (and its cache key covers them).
#pragma once
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

MM_DEVICE float mm_sigmoid(float x) { return mm_rcp(1.f + mm_exp(-x)); }

// silu(g) * u
struct SiLU {
  MM_DEVICE static float apply(float g, float u) { return g * mm_sigmoid(g) * u; }
};

// beta*tanh(g/beta)*sigmoid(g) * lin_beta*tanh(u/lin_beta); the divisions by the constants as
// products with their reciprocals (at most an ulp apart, and exact for powers of two)
template <class Params>
struct SiTUv2 {
  MM_DEVICE static float apply(float g, float u) {
    constexpr float b = Params::beta, lb = Params::linear_beta, rb = 1.f / b, rlb = 1.f / lb;
    return b * mm_tanh(g * rb) * mm_sigmoid(g) * (lb * mm_tanh(u * rlb));
  }
};

// silu(min(g, L)) * clamp(u, -L, L)
template <class Params>
struct SwiGLU {
  MM_DEVICE static float apply(float g, float u) {
    const float L = Params::limit;
    g = fminf(g, L);
    u = fminf(fmaxf(u, -L), L);
    return g * mm_sigmoid(g) * u;
  }
};

}  // namespace megamoe
