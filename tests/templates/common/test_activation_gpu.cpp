// templates/common/activation.cuh on the GPU against the emulating reference's activations
// (reference::kernel_activation, the same arithmetic compiled for the host): each activation,
// rendered as the kernels render it (codegen's activation_code), equals the host's bit for bit
// over the probe pairs (tests/support/activation_probes.hpp). Their accuracy against double
// precision is tests/templates/interface/test_activation_math.cpp's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "codegen/tile_sizes.hpp"
#include "reference/activation_ref.hpp"
#include "support/activation_probes.hpp"
#include "support/elementwise_kernel.hpp"

using namespace megamoe;

namespace {

void check_activation(const Activation& act) {
  const ActivationCode code = activation_code(act);
  const std::vector<float> in = test::activation_probe_pairs();
  const std::vector<float> got = test::run_elementwise<float, float>(
      "test_activation_" + code.tag, {"common/activation.cuh"}, "float", "float",
      "out[i] = " + code.type + "::apply(in[2 * i], in[2 * i + 1]);", in, in.size() / 2, code.preamble);
  std::size_t wrong = 0, nan = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = in[2 * i], u = in[2 * i + 1], want = reference::kernel_activation(act, g, u);
    bool same;
    if (std::isnan(want)) same = std::isnan(got[i]), ++nan;  // a NaN's payload is not compared
    else same = std::memcmp(&got[i], &want, sizeof want) == 0;
    if (!same && ++wrong <= 10) UNSCOPED_INFO("g " << g << ", u " << u << ": device " << got[i] << ", host " << want);
  }
  INFO(code.tag << ": " << got.size() << " pairs, " << nan << " of them NaN");
  CHECK(wrong == 0);
  CHECK(nan < got.size() / 8);  // the comparison saw numbers
}

}  // namespace

TEST_CASE("SiTUv2 on the device is the emulating reference's, bit for bit", "[gpu][activation]") {
  Activation a;
  a.kind = ActivationKind::situv2, a.beta = 4.f, a.linear_beta = 25.f;
  check_activation(a);
  a.beta = 2.5f, a.linear_beta = 8.f;  // another config's parameters
  check_activation(a);
}

TEST_CASE("SiLU and SwiGLU on the device are the emulating reference's, bit for bit", "[gpu][activation]") {
  Activation a;
  a.kind = ActivationKind::silu;
  check_activation(a);
  a.kind = ActivationKind::swiglu, a.limit = 7.f;
  check_activation(a);
  a.alpha = 1.702f, a.up_offset = 1.f;  // gpt-oss's
  check_activation(a);
}
