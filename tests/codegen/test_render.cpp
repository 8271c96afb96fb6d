// Rendering: kernel names spell the specialisation; the source carries the activation and its
// parameters exactly; every included template header is collected.
#include <catch2/catch.hpp>

#include "codegen/kernel_catalog.hpp"
#include "codegen/template_library.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
Activation situv2() { return {ActivationKind::situv2, 4.0f, 25.0f, 0.f}; }
}  // namespace

TEST_CASE("kernel names spell the specialisation (golden)", "[codegen]") {
  CHECK(act_tile_spec(situv2(), {64, 256}, false).name() == "megamoe_act_tile_situv2_bm64_bn256_bc0");
  CHECK(act_tile_spec({ActivationKind::silu}, {16, 128}, true).name() == "megamoe_act_tile_silu_bm16_bn128_bc1");
  CHECK(act_tile_spec({ActivationKind::swiglu, 0, 0, 7.f}, {32, 64}, false).name() ==
        "megamoe_act_tile_swiglu_bm32_bn64_bc0");
}

TEST_CASE("the rendered source calls the template with the config's values", "[codegen]") {
  RenderedKernel k = render(act_tile_spec(situv2(), {64, 256}, false));
  CHECK(k.name == "megamoe_act_tile_situv2_bm64_bn256_bc0");
  CHECK(k.threads == 256);
  CHECK_THAT(k.source, Catch::Contains("extern \"C\" __global__ void __launch_bounds__(256)\n"
                                       "megamoe_act_tile_situv2_bm64_bn256_bc0("));
  CHECK_THAT(k.source, Catch::Contains("static constexpr float beta = 0x1p+2f;"));          // 4.0 exactly
  CHECK_THAT(k.source, Catch::Contains("static constexpr float linear_beta = 0x1.9p+4f;"));  // 25.0 exactly
  CHECK_THAT(k.source, Catch::Contains("megamoe::act_tile<megamoe::SiTUv2<ActivationParams>, 64, 256, false>"));

  RenderedKernel sw = render(act_tile_spec({ActivationKind::swiglu, 0, 0, 7.f}, {32, 64}, true));
  CHECK_THAT(sw.source, Catch::Contains("static constexpr float limit = 0x1.cp+2f;"));  // 7.0
  CHECK_THAT(sw.source, Catch::Contains("megamoe::SwiGLU<ActivationParams>, 32, 64, true>"));
}

TEST_CASE("every template header a kernel includes is collected, each once", "[codegen]") {
  RenderedKernel k = render(act_tile_spec(situv2(), {64, 256}, false));
  std::vector<std::string> paths;
  for (auto& h : k.headers) paths.push_back(h.path);
  CHECK(paths == std::vector<std::string>{"smoke/act_tile.cuh", "common/activation.cuh", "prelude/megamoe_prelude.cuh"});
  for (auto& h : k.headers) CHECK(h.text == std::string(template_text(h.path)));
}

TEST_CASE("an include of a template that does not exist is an error naming it", "[codegen]") {
  CHECK_THROWS_WITH(collect_headers("#include \"smoke/nope.cuh\"\n"), Catch::Contains("smoke/nope.cuh"));
  CHECK(collect_headers("// #include \"smoke/nope.cuh\" in a comment\n").empty());
}

TEST_CASE("a bucket's kernels follow its config values", "[codegen]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  Config k = load_config("kimi_k3_a8w4");
  auto small = kernels_for_bucket(k, k.bucket(8));
  REQUIRE(small.size() == 1);
  CHECK(small[0].name() == "megamoe_act_tile_situv2_bm16_bn128_bc0");
  CHECK(kernels_for_bucket(k, k.bucket(4096))[0].name() == "megamoe_act_tile_situv2_bm128_bn256_bc0");
  Config g = load_config("generic_a8w4");
  CHECK(kernels_for_bucket(g, g.bucket(1))[0].name() == "megamoe_act_tile_silu_bm64_bn128_bc0");
}
