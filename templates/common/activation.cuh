// The activations act(gate, up) of GEMM1's two halves. Each is a type with one static apply();
// parameters come from a Params type rendered from the config, so that a kernel is specialised on
// them (and its cache key covers them). The arithmetic is interface/activation_math.cuh's, which
// the emulating reference computes too.
#pragma once
#include "interface/activation_math.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// silu(g) * u
struct SiLU {
  MM_DEVICE static float apply(float g, float u) { return act::silu(g, u); }
};

// beta*tanh(g/beta)*sigmoid(g) * lin_beta*tanh(u/lin_beta)
template <class Params>
struct SiTUv2 {
  MM_DEVICE static float apply(float g, float u) { return act::situv2(g, u, Params::beta, Params::linear_beta); }
};

// min(g, L) * sigmoid(alpha * min(g, L)) * (clamp(u, -L, L) + up_offset): the clamped SwiGLU
// (alpha 1, up_offset 0) and gpt-oss's (alpha 1.702, up_offset 1)
template <class Params>
struct SwiGLU {
  MM_DEVICE static float apply(float g, float u) {
    return act::swiglu(g, u, Params::limit, Params::alpha, Params::up_offset);
  }
};

}  // namespace megamoe
