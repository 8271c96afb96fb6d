// The activations act(gate, up) in fp32, from correctly rounded operations only (add, multiply,
// fma, min, max) and exponent bits: the kernels' compiler and the host's compute them bit for
// bit alike, so the emulating reference (src/reference) takes the kernels' very h values. An
// h value near an fp8 rounding boundary would otherwise round one way in a kernel and the other in
// the reference. Plain C++ and the device's intrinsics; the host build turns off fp contraction
// (CMakeLists.txt), the device side spells every product and sum out so that none is contracted.
// Accuracy against double precision: tests/templates/interface/test_activation_math.cpp.
#pragma once

#if !defined(__CUDACC_RTC__) && !defined(__HIPCC_RTC__)
#include <cmath>
#include <cstring>
#endif
#if defined(__CUDACC__) || defined(__CUDACC_RTC__) || defined(__HIPCC__) || defined(__HIPCC_RTC__)
#define MM_ACT_FN __host__ __device__ __forceinline__
#else
#define MM_ACT_FN inline
#endif

namespace megamoe::act {

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
MM_ACT_FN float mul(float a, float b) { return __fmul_rn(a, b); }
MM_ACT_FN float add(float a, float b) { return __fadd_rn(a, b); }
MM_ACT_FN float sub(float a, float b) { return __fsub_rn(a, b); }
MM_ACT_FN float fma(float a, float b, float c) { return fmaf(a, b, c); }
MM_ACT_FN float min(float a, float b) { return fminf(a, b); }
MM_ACT_FN float max(float a, float b) { return fmaxf(a, b); }
MM_ACT_FN float abs(float a) { return fabsf(a); }
MM_ACT_FN float copysign(float a, float b) { return copysignf(a, b); }
MM_ACT_FN float bits_to_float(int b) { return __int_as_float(b); }
MM_ACT_FN int float_to_bits(float f) { return __float_as_int(f); }
#else
MM_ACT_FN float mul(float a, float b) { return a * b; }
MM_ACT_FN float add(float a, float b) { return a + b; }
MM_ACT_FN float sub(float a, float b) { return a - b; }
MM_ACT_FN float fma(float a, float b, float c) { return std::fma(a, b, c); }
MM_ACT_FN float min(float a, float b) { return std::fmin(a, b); }
MM_ACT_FN float max(float a, float b) { return std::fmax(a, b); }
MM_ACT_FN float abs(float a) { return std::fabs(a); }
MM_ACT_FN float copysign(float a, float b) { return std::copysign(a, b); }
MM_ACT_FN float bits_to_float(int b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
MM_ACT_FN int float_to_bits(float f) {
  int b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
#endif

constexpr float kLog2e = 1.4426950408889634f;

// 2^x = scale (1 + q) for x in [-127, 128] (the callers clamp it): scale = 2^n with n the
// integer nearest x, and q = 2^f - 1 on f = x - n in [-1/2, 1/2] as f times a degree-5 polynomial
// (the degree-6 Taylor series of 2^f; truncation below 1.2e-7 relative). At the range's ends 2^n's
// bits are 0 and infinity. A NaN x gives a NaN q. No branches anywhere here: the kernels compute an
// activation for every value of an unrolled tile, and straight-line code lets the compiler
// interleave them.
struct Exp2Parts {
  float scale, q;
};
MM_ACT_FN Exp2Parts exp2_parts(float x) {
  // n as x + 1.5 2^23 rounds x (to nearest, ties to even), and as an integer from that sum's last
  // bits: adds, not the conversions' quarter-rate instructions
  constexpr float kRound = 12582912.f;
  const float t = add(x, kRound), n = sub(t, kRound), f = sub(x, n);  // f exact
  const int ni = float_to_bits(t) - float_to_bits(kRound);
  constexpr float c1 = 0.6931471805599453f, c2 = 0.2402265069591007f, c3 = 0.05550410866482158f,
                  c4 = 0.009618129107628477f, c5 = 0.0013333558146428443f, c6 = 0.00015403530393381608f;
  const float poly = fma(f, fma(f, fma(f, fma(f, fma(f, c6, c5), c4), c3), c2), c1);
  return {bits_to_float(int(unsigned(ni + 127) << 23)), mul(f, poly)};
}

// x clamped to [-127, 128], a NaN kept (compares, where fminf and fmaxf would drop it)
MM_ACT_FN float exp2_domain(float x) {
  x = x < -127.f ? -127.f : x;
  return x > 128.f ? 128.f : x;
}

// 2^x: 0 below 2^-126.5 (subnormal results above it), infinite from 2^127.5, NaN for NaN
MM_ACT_FN float exp2(float x) {
  const Exp2Parts e = exp2_parts(exp2_domain(x));
  return mul(add(1.f, e.q), e.scale);
}

// e^-x
MM_ACT_FN float exp_neg(float x) { return exp2(mul(x, -kLog2e)); }

// 1 / d for d >= 1 (the activations' denominators): d = m 2^k with m in [1, 2), 1 / m by Newton's
// iteration from a linear first guess (error 1/17, then 3.5e-3, 1.2e-5, 1.5e-10), times 2^-k.
// 0 for d from 2^127 and infinite; a NaN d gives a number (the callers' numerators are NaN then).
MM_ACT_FN float rcp_ge1(float d) {
  const int bits = float_to_bits(d), k = (bits >> 23) - 127;
  const float m = bits_to_float((bits & 0x007FFFFF) | 0x3F800000);
  float r = fma(m, -8.f / 17.f, 24.f / 17.f);
  for (int i = 0; i < 3; ++i) r = fma(r, fma(-m, r, 1.f), r);
  const float q = mul(r, bits_to_float(int(unsigned(127 - k) << 23)));  // unsigned: k may pass 127
  return k > 126 ? 0.f : q;
}

// tanh(y) = num / den with den in [1, 2]: with E = e^-2|y| - 1 (from 2^x's parts, exact in form
// near 0, so that no series is needed), num = -E with y's sign and den = 2 + E; NaN for NaN.
struct TanhRatio {
  float num, den;
  Exp2Parts e;  // e^-2|y|'s parts, which SiTUv2 reuses
};
MM_ACT_FN TanhRatio tanh_ratio(float y) {
  float x = mul(abs(y), -2.f * kLog2e);  // <= 0
  x = x < -127.f ? -127.f : x;
  const Exp2Parts e = exp2_parts(x);
  const float em1 = fma(e.scale, e.q, sub(e.scale, 1.f));  // e.scale <= 1: exact
  return {copysign(sub(0.f, em1), y), add(2.f, em1), e};
}

// v * sigmoid(s) = v / (1 + e^-s): 0 where e^-s overflows (for finite v)
MM_ACT_FN float times_sigmoid(float v, float s) { return mul(v, rcp_ge1(add(1.f, exp_neg(s)))); }

// silu(g) * u
MM_ACT_FN float silu(float g, float u) { return mul(times_sigmoid(g, g), u); }

// beta tanh(g / beta) sigmoid(g) * linear_beta tanh(u / linear_beta), with one reciprocal for both
// tanh and the sigmoid. With beta 4, tanh(g / 4)'s e^-|g|/2 squared is sigmoid's e^-|g|:
// sigmoid(g) = 1 / (1 + t^2) for g >= 0 and t^2 / (1 + t^2) below, with no exponential of its own.
MM_ACT_FN float situv2(float g, float u, float beta, float linear_beta) {
  const TanhRatio tg = tanh_ratio(mul(g, 1.f / beta)), tu = tanh_ratio(mul(u, 1.f / linear_beta));
  float sig_num = 1.f, sig_den;
  if (beta == 4.f) {  // a constant in the kernels: no branch there
    const float t = mul(add(1.f, tg.e.q), tg.e.scale), t2 = mul(t, t);  // e^-|g|/2, e^-|g|
    sig_num = g < 0.f ? t2 : 1.f, sig_den = add(1.f, t2);
  } else {
    sig_den = add(1.f, exp_neg(g));
  }
  const float num = mul(mul(mul(beta, linear_beta), mul(tg.num, tu.num)), sig_num);
  return mul(num, rcp_ge1(mul(mul(tg.den, tu.den), sig_den)));
}
// min(g, L) sigmoid(alpha min(g, L)) (clamp(u, -L, L) + up_offset), min and max as fminf and
// fmaxf (a NaN operand gives the other)
MM_ACT_FN float swiglu(float g, float u, float limit, float alpha, float up_offset) {
  g = min(g, limit);
  u = min(max(u, -limit), limit);
  return mul(times_sigmoid(g, mul(alpha, g)), add(u, up_offset));
}

}  // namespace megamoe::act

#undef MM_ACT_FN
