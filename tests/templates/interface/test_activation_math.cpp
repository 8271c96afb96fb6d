// templates/interface/activation_math.cuh on the host (the emulating reference's activations,
// which the kernels compute bit for bit: tests/templates/common/test_activation_gpu.cpp) against
// the activations in double precision from libm. Finite results stay within 2e-6 (1 + |g| / 8)
// relative: a few ulp from the operations, and e^-g's argument g log2(e) rounded to float, an error
// that grows with |g|. Infinities and NaN are double precision's, but where e^-s is past float's
// range and the sigmoid's 0 meets an infinite factor (0 x inf: NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "reference/activation_ref.hpp"
#include "support/activation_probes.hpp"

using namespace megamoe;

namespace {

double sigmoid_d(double s) { return 1.0 / (1.0 + std::exp(-s)); }

double activation_d(const Activation& a, double g, double u) {
  switch (a.kind) {
    case ActivationKind::silu: return g * sigmoid_d(g) * u;
    case ActivationKind::situv2:
      return a.beta * std::tanh(g / a.beta) * sigmoid_d(g) * (a.linear_beta * std::tanh(u / a.linear_beta));
    case ActivationKind::swiglu:
      g = std::fmin(g, a.limit), u = std::fmin(std::fmax(u, -a.limit), a.limit);
      return g * sigmoid_d(a.alpha * g) * (u + a.up_offset);
  }
  return NAN;
}

// The sigmoid's argument: g, or alpha min(g, limit)
double sigmoid_arg(const Activation& a, float g) {
  return a.kind == ActivationKind::swiglu ? a.alpha * std::fmin(g, a.limit) : g;
}

void check_against_double(const Activation& a) {
  const std::vector<float> in = test::activation_probe_pairs();
  std::size_t wrong = 0, finite = 0;
  double worst = 0;
  for (std::size_t i = 0; i < in.size() / 2; ++i) {
    const float g = in[2 * i], u = in[2 * i + 1];
    const float got = reference::kernel_activation(a, g, u);
    const double want = activation_d(a, g, u);
    // e^-s past float's largest value: the kernels' sigmoid is 0 (about 2^-127.5 in double)
    const bool sigmoid_zero = -sigmoid_arg(a, g) * 1.4426950408889634 >= 127.5;
    bool ok;
    if (std::isnan(want)) ok = std::isnan(got);
    else if (std::isinf(want)) ok = got == want;
    else {
      const double gs = std::isfinite(g) ? std::fabs(g) / 8 : 0, err = std::fabs(double(got) - want);
      ok = std::isfinite(got) && err <= 2e-6 * (1 + gs) * std::fabs(want) + 1e-30;
      if (std::fabs(want) > 1e-30) worst = std::max(worst, err / std::fabs(want) / (1 + gs)), ++finite;
    }
    // Past float's range the sigmoid may be 0 (SiTUv2 with beta 4 squares e^-|g|/2 instead), and
    // an infinite factor then gives NaN: both are what the kernels compute.
    if (!ok && sigmoid_zero) ok = got == 0.f || std::isnan(got);
    if (!ok && ++wrong <= 10) UNSCOPED_INFO("g " << g << ", u " << u << ": " << got << ", double " << want);
  }
  INFO(to_string(a.kind) << ": worst relative error / (1 + |g| / 8) " << worst << " over " << finite
                         << " finite values");
  CHECK(wrong == 0);
  CHECK(finite > in.size() / 4);  // most probes compared as finite values
}

}  // namespace

TEST_CASE("the kernels' SiTUv2 is within a few ulp of double precision", "[activation]") {
  Activation a;
  a.kind = ActivationKind::situv2, a.beta = 4.f, a.linear_beta = 25.f;
  check_against_double(a);
  a.beta = 2.5f, a.linear_beta = 8.f;  // another config's parameters
  check_against_double(a);
}

TEST_CASE("the kernels' SiLU and SwiGLU are within a few ulp of double precision", "[activation]") {
  Activation a;
  a.kind = ActivationKind::silu;
  check_against_double(a);
  a.kind = ActivationKind::swiglu, a.limit = 7.f;
  check_against_double(a);
  a.alpha = 1.702f, a.up_offset = 1.f;  // gpt-oss's
  check_against_double(a);
}

TEST_CASE("the kernels' 2^x and 1/x: exact where they can be, their ranges' ends, NaN", "[activation]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (int n = -126; n <= 127; ++n) CHECK(act::exp2(float(n)) == std::ldexp(1.f, n));
  CHECK(act::exp2(-126.5f) == Approx(std::ldexp(std::sqrt(2.0), -127)).epsilon(1e-6));  // subnormal
  CHECK(act::exp2(std::nextafter(-126.5f, -200.f)) == 0.f);
  CHECK(act::exp2(std::nextafter(127.5f, 0.f)) == Approx(std::exp2(double(std::nextafter(127.5f, 0.f)))).epsilon(1e-6));
  CHECK(act::exp2(127.5f) == inf);
  CHECK(act::exp2(1e4f) == inf);
  CHECK(act::exp2(-inf) == 0.f);
  CHECK(act::exp2(inf) == inf);
  CHECK(std::isnan(act::exp2(NAN)));
  double worst = 0;
  for (float x = -20.f; x <= 20.f; x += 1.f / 1024)
    worst = std::max(worst, std::fabs(act::exp2(x) / std::exp2(double(x)) - 1));
  INFO("2^x: worst relative error " << worst);
  CHECK(worst < 3e-7);  // about 2.5 ulp

  for (int k = 0; k <= 126; ++k) CHECK(act::rcp_ge1(std::ldexp(1.f, k)) == std::ldexp(1.f, -k));
  CHECK(act::rcp_ge1(std::ldexp(1.f, 127)) == 0.f);
  CHECK(act::rcp_ge1(inf) == 0.f);
  worst = 0;
  for (float d = 1.f; d < 1e6f; d *= 1.0001f) worst = std::max(worst, std::fabs(act::rcp_ge1(d) * double(d) - 1));
  INFO("1/x: worst relative error " << worst);
  CHECK(worst < 2e-7);  // about 1.5 ulp
}
