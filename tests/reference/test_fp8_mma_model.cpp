// The fp8 MMA accumulation model on sums small enough to follow by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "reference/fp8_mma_model.hpp"

using namespace megamoe;

namespace {

// a and b of one 32-product step (or more), products set by hand, the rest zero.
struct Step {
  std::vector<float> a, b;
  explicit Step(int len = 32) : a(len, 0.f), b(len, 0.f) {}
  void set(int i, float x, float y) { a[i] = x, b[i] = y; }
  float sum() const { return reference::fp8_mma_chunk(a.data(), b.data(), int(a.size())); }
};

}  // namespace

TEST_CASE("fp8 MMA model: products 14 or more bits below the largest are lost", "[reference]") {
  Step s;
  s.set(0, 1.f, 1.f);
  for (int i = 1; i < 32; ++i) s.set(i, std::ldexp(1.f, -7), std::ldexp(1.f, -7));  // 2^-14 each
  CHECK(s.sum() == 1.f);  // exact: 1 + 31 * 2^-14
}

TEST_CASE("fp8 MMA model: products 13 bits below the largest are kept exactly", "[reference]") {
  Step s;
  s.set(0, 1.f, 1.f);
  for (int i = 1; i < 32; ++i) s.set(i, std::ldexp(1.f, -6), std::ldexp(1.f, -6));  // 2^-12 each
  CHECK(s.sum() == 1.f + 31 * std::ldexp(1.f, -12));
}

TEST_CASE("fp8 MMA model: the alignment exponent leaves the mantissas' product out", "[reference]") {
  // 1.875 * 1.875 = 3.515625 has exponent 1, but aligns as exponent 0 + 0: the two 2^-13
  // products count (with exponent 1 they would both be lost), and the sum keeps 13 bits.
  Step s;
  s.set(0, 1.875f, 1.875f);
  s.set(1, std::ldexp(1.f, -7), std::ldexp(1.f, -6));
  s.set(2, std::ldexp(1.f, -7), std::ldexp(1.f, -6));
  CHECK(s.sum() == 3.515625f + std::ldexp(1.f, -12));
}

TEST_CASE("fp8 MMA model: terms are truncated toward zero", "[reference]") {
  // -1.5 * 2^-14 * 2^13 = -0.75 units: toward zero it is lost (a floor would take a unit off).
  Step s;
  s.set(0, 1.f, 1.f);
  s.set(1, -1.5f * std::ldexp(1.f, -7), std::ldexp(1.f, -7));
  CHECK(s.sum() == 1.f);
  Step n;  // and the same for a negative sum
  n.set(0, -1.f, 1.f);
  n.set(1, 1.5f * std::ldexp(1.f, -7), std::ldexp(1.f, -7));
  CHECK(n.sum() == -1.f);
}

TEST_CASE("fp8 MMA model: the accumulator keeps 13 mantissa bits between steps", "[reference]") {
  // Step 1: 1 + 2^-13 (fits 13 bits at exponent 0). Step 2 adds 1: 2 + 2^-13 needs 14 bits at
  // exponent 1, so the sum is cut to 2.
  Step s(64);
  s.set(0, 1.f, 1.f);
  s.set(1, std::ldexp(1.f, -7), std::ldexp(1.f, -6));
  s.set(32, 1.f, 1.f);
  CHECK(s.sum() == 2.f);
  Step one;  // step 1 alone keeps its last bit
  one.set(0, 1.f, 1.f);
  one.set(1, std::ldexp(1.f, -7), std::ldexp(1.f, -6));
  CHECK(one.sum() == 1.f + std::ldexp(1.f, -13));
}

TEST_CASE("fp8 MMA model: sums of few bits are exact, zeros add nothing", "[reference]") {
  Step s;
  float exact = 0.f;
  for (int i = 0; i < 32; i += 2) s.set(i, 0.5f * float(i % 5) - 1.f, 2.f), exact += (0.5f * float(i % 5) - 1.f) * 2.f;
  CHECK(s.sum() == exact);
  CHECK(Step().sum() == 0.f);
}
