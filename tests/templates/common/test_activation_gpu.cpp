// templates/common/activation.cuh on the GPU against the fp32 reference (src/reference): each
// activation, rendered as the kernels render it (codegen's activation_code), over gate and up
// values from 1e-30 to 1e4 of both signs, the series' edge (|y| = 1/4), where e^-g overflows,
// zeros, infinities and NaN. Finite results stay within 2e-6 (1 + |g| / 8) relative (about 16
// ulp: the special function unit's 2^x and 1/x, and e^-g's argument g log2(e) rounded to float,
// an error that grows with |g|) or 1e-30 absolute (the unit flushes subnormal results to zero);
// infinities and NaN are the reference's, but for SiLU's 0 x inf where sigmoid(g) is subnormal.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "reference/activation_ref.hpp"
#include "reference/h_flips.hpp"
#include "support/elementwise_kernel.hpp"

using namespace megamoe;

namespace {

std::vector<float> probe_inputs() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> one = {0.f, -0.f, inf, -inf, nan, 1e-30f, 1e-7f, 1e-3f, 0.1f, 0.5f, 1.f, 0.9999f, 1.0001f,
                            2.f, 4.f, 7.f, 10.f, 25.f, 40.f, 87.f, 88.f, 89.f, 100.f, 176.f, 200.f, 1e4f};
  for (float edge : {1.f, 6.25f}) {  // |g / 4| and |u / 25| at 1/4
    float x = edge;
    for (int i = 0; i < 4; ++i) x = std::nextafter(x, 0.f);
    for (int i = 0; i < 8; ++i, x = std::nextafter(x, inf)) one.push_back(x);
  }
  const std::size_t n = one.size();
  for (std::size_t i = 0; i < n; ++i) one.push_back(-one[i]);
  std::vector<float> pairs;
  for (float g : one)
    for (float u : one) pairs.push_back(g), pairs.push_back(u);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-12, 5);
  while (pairs.size() < 2 * 65536) pairs.push_back((rng() & 1 ? -1.f : 1.f) * std::ldexp(mant(rng), exp(rng)));
  return pairs;
}

void check_activation(const Activation& act) {
  const ActivationCode code = activation_code(act);
  const std::vector<float> in = probe_inputs();
  const std::vector<float> got = test::run_elementwise<float, float>(
      "test_activation_" + code.tag, {"common/activation.cuh"}, "float", "float",
      "out[i] = " + code.type + "::apply(in[2 * i], in[2 * i + 1]);", in, in.size() / 2, code.preamble);
  std::size_t wrong = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = in[2 * i], u = in[2 * i + 1];
    const float want = reference::activation(act, g, u);
    const double gs = std::isfinite(g) ? std::fabs(g) / 8 : 0;  // the |g| term where g is finite
    // Where the reference's sigmoid(g) is subnormal (g below -87.3) the device's is zero, so an
    // infinite u gives 0 x inf = NaN there where the reference has an infinity.
    const float sig = reference::sigmoid(g);
    const bool flushed = sig > 0.f && sig < std::numeric_limits<float>::min() && std::isinf(u);
    bool ok;
    if (flushed && act.kind == ActivationKind::silu) ok = std::isnan(got[i]);
    else if (std::isnan(want)) ok = std::isnan(got[i]);
    else if (std::isinf(want)) ok = got[i] == want;
    else {
      const double err = std::fabs(double(got[i]) - double(want));
      ok = std::isfinite(got[i]) && err <= reference::kernel_activation_error(g, want);  // what h_flips assumes
      if (std::fabs(want) > 1e-30) worst = std::max(worst, err / std::fabs(double(want)) / (1 + gs));
    }
    if (!ok && ++wrong <= 10) UNSCOPED_INFO("g " << g << ", u " << u << ": device " << got[i] << ", reference " << want);
  }
  INFO(code.tag << ": worst relative error / (1 + |g| / 8) " << worst << " over " << got.size() << " pairs");
  CHECK(wrong == 0);
  CHECK(worst > 0);  // the comparison saw finite values
}

}  // namespace

TEST_CASE("SiTUv2 on the device is the fp32 reference's to a few ulp", "[gpu][activation]") {
  Activation a;
  a.kind = ActivationKind::situv2, a.beta = 4.f, a.linear_beta = 25.f;
  check_activation(a);
  a.beta = 2.5f, a.linear_beta = 8.f;  // another config's parameters
  check_activation(a);
}

TEST_CASE("SiLU and SwiGLU on the device are the fp32 reference's to a few ulp", "[gpu][activation]") {
  Activation a;
  a.kind = ActivationKind::silu;
  check_activation(a);
  a.kind = ActivationKind::swiglu, a.limit = 7.f;
  check_activation(a);
  a.alpha = 1.702f, a.up_offset = 1.f;  // gpt-oss's
  check_activation(a);
}
