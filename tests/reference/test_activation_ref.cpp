// The CPU reference activations against hand-computed values (Python's math, double precision).
#include <catch2/catch.hpp>

#include "reference/activation_ref.hpp"

using namespace megamoe::reference;

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
  CHECK(swiglu(1.f, 2.f, 7.f) == Approx(1.4621171572600098).epsilon(1e-6));
  CHECK(swiglu(10.f, -40.f, 7.f) == Approx(-48.95535849147437).epsilon(1e-6));  // both clamped
  CHECK(swiglu(-3.f, 0.5f, 7.f) == Approx(-0.07113880976635018).epsilon(1e-6));
}
