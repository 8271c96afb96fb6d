#include "reference/fp8_mma_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace megamoe::reference {

namespace {

// The unbiased exponent of a normal float (every nonzero value here is one).
inline int exponent_of(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return int((u >> 23) & 0xFF) - 127;
}

// v with its mantissa cut to kMmaMantissaBits bits, toward zero.
inline float truncate_mantissa(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  u &= ~((1u << (23 - kMmaMantissaBits)) - 1);
  std::memcpy(&v, &u, 4);
  return v;
}

}  // namespace

float fp8_mma_chunk(const float* a, const float* b, int len) {
  float acc = 0.f;
  for (int k0 = 0; k0 < len; k0 += kMmaStepK) {
    // A zero operand's exponent field reads -127: such a product's exponent sum stays below any
    // product of these formats that is not zero, so it never sets the alignment, and it adds 0.
    int emax = exponent_of(acc);
    for (int i = k0; i < k0 + kMmaStepK; ++i) emax = std::max(emax, exponent_of(a[i]) + exponent_of(b[i]));
    // In units of 2^(emax - 13) every term is below 2^15 (a product's mantissas are below 4)
    // and the 33 terms' sum below 2^21: int32 holds them, and the scaled sum is exact in fp32.
    const double unit = std::ldexp(1.0, kMmaMantissaBits - emax);
    std::int32_t sum = std::int32_t(double(acc) * unit);  // the conversion truncates toward zero
    for (int i = k0; i < k0 + kMmaStepK; ++i) sum += std::int32_t(double(a[i] * b[i]) * unit);
    acc = truncate_mantissa(float(std::ldexp(double(sum), emax - kMmaMantissaBits)));
  }
  return acc;
}

}  // namespace megamoe::reference
