// The CPU reference activations against hand-computed values (Python's math, double precision).
#include <catch2/catch.hpp>

#include <cmath>

#include "megamoe/config.hpp"
#include "reference/activation_ref.hpp"

using namespace megamoe::reference;
using megamoe::Activation;
using megamoe::ActivationKind;

TEST_CASE("reference silu", "[reference][silu]") {
  CHECK(silu(1.f, 2.f) == Approx(1.4621171572600098).epsilon(1e-6));
  CHECK(silu(-3.f, 0.5f) == Approx(-0.07113880976635018).epsilon(1e-6));
  CHECK(silu(10.f, -40.f) == Approx(-399.9818408525191).epsilon(1e-6));
}

TEST_CASE("reference situv2 (beta 4, linear_beta 25)", "[reference][situv2]") {
  CHECK(situv2(1.f, 2.f, 4.f, 25.f) == Approx(1.4293511315552199).epsilon(1e-6));
  CHECK(situv2(-3.f, 0.5f, 4.f, 25.f) == Approx(-0.06023695594960884).epsilon(1e-6));
  CHECK(situv2(10.f, -40.f, 4.f, 25.f) == Approx(-90.92900922276633).epsilon(1e-6));
  CHECK(situv2(0.f, 5.f, 4.f, 25.f) == 0.f);
}

TEST_CASE("reference clamped swiglu (limit 7)", "[reference][swiglu]") {
  CHECK(swiglu(1.f, 2.f, 7.f, 1.f, 0.f) == Approx(1.4621171572600098).epsilon(1e-6));
  CHECK(swiglu(10.f, -40.f, 7.f, 1.f, 0.f) == Approx(-48.95535849147437).epsilon(1e-6));  // both clamped
  CHECK(swiglu(-3.f, 0.5f, 7.f, 1.f, 0.f) == Approx(-0.07113880976635018).epsilon(1e-6));
}

TEST_CASE("reference gpt-oss swiglu (limit 7, alpha 1.702, up + 1)", "[reference][swiglu]") {
  CHECK(swiglu(1.f, 2.f, 7.f, 1.702f, 1.f) == Approx(2.537387297798464).epsilon(1e-6));
  CHECK(swiglu(10.f, -40.f, 7.f, 1.702f, 1.f) == Approx(-41.99971876981991).epsilon(1e-6));  // both clamped
  CHECK(swiglu(-3.f, 0.5f, 7.f, 1.702f, 1.f) == Approx(-0.027106964561678954).epsilon(1e-6));
  CHECK(swiglu(-0.75f, -7.5f, 7.f, 1.702f, 1.f) == Approx(0.9816596547921732).epsilon(1e-6));
}

// A static h scale is only as good as the bound it comes from: over a grid of (g, u) that reaches
// every clamp and SiLU's least value, no SwiGLU of the family exceeds its bound, and the bound is
// within 1% of the largest value seen (a loose bound would waste fp8 range).
TEST_CASE("each SwiGLU's bound holds and is tight", "[reference][swiglu]") {
  struct P {
    float limit, alpha, up_offset;
  };
  for (P p : {P{7.f, 1.f, 0.f}, P{7.f, 1.702f, 1.f}, P{0.1f, 1.f, 0.f}, P{2.f, 0.5f, -3.f}}) {
    Activation a;
    a.kind = ActivationKind::swiglu, a.limit = p.limit, a.alpha = p.alpha, a.up_offset = p.up_offset;
    const float bound = megamoe::activation_bound(a);
    INFO("limit " << p.limit << " alpha " << p.alpha << " up_offset " << p.up_offset << ": bound " << bound);
    float largest = 0.f;
    for (int i = -4000; i <= 4000; ++i)
      for (float u : {-1e4f, -p.limit, 0.f, p.limit, 1e4f}) {
        const float g = i * 0.005f;  // -20 to 20, past the clamp and through x sigmoid(alpha x)'s least value
        largest = std::fmax(largest, std::fabs(activation(a, g, u)));
      }
    CHECK(largest <= bound);  // reached at the clamp; the quantizers saturate at 448 past it
    CHECK(largest > 0.99f * bound);
  }
}
