// The activations act(gate, up) of GEMM1's two halves. Each is a type with one static
// apply(); parameters come from a Params type rendered from the config, so that a kernel is
// specialised on them (and its cache key covers them).
//
// They are built from the special function unit's 2^x and 1/x, a few ulp from the fp32
// reference's values (tests/templates/common/test_activation_gpu.cpp bounds the error): the epilogue
// computes one per output value, and the library calls (tanhf, expf, a correctly rounded
// reciprocal) cost about twice the instructions.
#pragma once
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

constexpr float kLog2e = 1.4426950408889634f;

// e^-x
MM_DEVICE float mm_exp_neg(float x) { return mm_exp2_approx(x * -kLog2e); }

// 1 / (1 + e^-x): 0 where e^-x overflows, 1 where it underflows.
MM_DEVICE float mm_sigmoid(float x) { return mm_rcp_approx(1.f + mm_exp_neg(x)); }

// tanh(y) = num / den, with den in [1, 2] for every y (infinities included). For |y| < 1/4 a
// series (1 - e^-2|y| would cancel): num = y (1 - y^2/3 + 2y^4/15 - 17y^6/315 + 62y^8/2835), the
// next term below 1e-8 relative; den = 1. Else (1 - e^-2|y|) / (1 + e^-2|y|) with y's sign.
struct TanhRatio {
  float num, den;
};
MM_DEVICE TanhRatio mm_tanh_ratio(float y) {
  const float a = fabsf(y);
  const float f = mm_exp_neg(2.f * a);
  if (a < 0.25f) {
    const float y2 = y * y;
    const float p = fmaf(y2, fmaf(y2, fmaf(y2, fmaf(y2, 62.f / 2835.f, -17.f / 315.f), 2.f / 15.f), -1.f / 3.f), 1.f);
    return {y * p, 1.f};
  }
  return {copysignf(1.f - f, y), 1.f + f};
}

// silu(g) * u
struct SiLU {
  MM_DEVICE static float apply(float g, float u) { return g * mm_sigmoid(g) * u; }
};

// beta*tanh(g/beta)*sigmoid(g) * lin_beta*tanh(u/lin_beta), with one reciprocal for both tanh
template <class Params>
struct SiTUv2 {
  MM_DEVICE static float apply(float g, float u) {
    constexpr float b = Params::beta, lb = Params::linear_beta;
    const TanhRatio tg = mm_tanh_ratio(g * (1.f / b)), tu = mm_tanh_ratio(u * (1.f / lb));
    return (b * lb) * (tg.num * tu.num) * mm_rcp_approx(tg.den * tu.den) * mm_sigmoid(g);
  }
};

// min(g, L) * sigmoid(alpha * min(g, L)) * (clamp(u, -L, L) + up_offset): the clamped SwiGLU
// (alpha 1, up_offset 0) and gpt-oss's (alpha 1.702, up_offset 1)
template <class Params>
struct SwiGLU {
  MM_DEVICE static float apply(float g, float u) {
    const float L = Params::limit;
    g = fminf(g, L);
    u = fminf(fmaxf(u, -L), L);
    return g * mm_sigmoid(Params::alpha * g) * (u + Params::up_offset);
  }
};

}  // namespace megamoe
