// The hip backend: hipRTC compiles the templates for gfx90a (Debian's HIP 5.2 knows no gfx942
// or gfx950 and no fp8 types; README.md says what is checked for AMD).
#include <catch2/catch.hpp>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "jit/kernel_builder.hpp"
#include "megamoe/errors.hpp"

using namespace megamoe;

#if MEGAMOE_HAVE_HIP
TEST_CASE("hipRTC compiles the layer kernels of each activation for gfx90a", "[hiprtc]") {
  KernelBuilder b(make_compiler(BackendKind::hip), "gfx90a", {});
  CHECK_THAT(b.compiler().identity(), Catch::StartsWith("hiprtc 5."));
  for (Activation a : {Activation{ActivationKind::silu}, Activation{ActivationKind::situv2, 4.f, 25.f, 0.f},
                       Activation{ActivationKind::swiglu, 0.f, 0.f, 7.f}})
    for (bool bc : {false, true}) {
      BuildReport r = b.build(stage1_portable_spec(a, 32, bc));
      INFO(r.kernel->symbol);
      CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");  // an AMDGPU code object
    }
  for (auto wire : {CombineWire::bf16, CombineWire::fp8_blockwise_1x32}) {
    for (const KernelSpec& s : std::vector<KernelSpec>{stage2_portable_spec(64, wire, false), combine_spec(wire)})
      CHECK(b.build(s).kernel->binary.substr(0, 4) == "\x7f" "ELF");
  }
  CHECK(b.build(route_spec()).kernel->binary.substr(0, 4) == "\x7f" "ELF");
  CHECK(b.build(shared_routes_spec()).kernel->binary.substr(0, 4) == "\x7f" "ELF");
  CHECK(b.build(quantize_rows_spec()).kernel->binary.substr(0, 4) == "\x7f" "ELF");
}

TEST_CASE("hipRTC compiles the portable path's kernels over several ranks for gfx90a", "[hiprtc][ep]") {
  KernelBuilder b(make_compiler(BackendKind::hip), "gfx90a", {});
  const Activation a{ActivationKind::situv2, 4.f, 25.f, 0.f};
  for (bool bc : {false, true})
    for (auto wire : {CombineWire::bf16, CombineWire::fp8_blockwise_1x32})
      for (const KernelSpec& s : std::vector<KernelSpec>{
               route_ep_spec(2), dispatch_ep_spec(32, false, bc), stage1_portable_ep_spec(a, 32, bc),
               stage2_portable_ep_spec(32, wire, bc), combine_ep_spec(wire)}) {
        INFO(s.name());
        CHECK(b.build(s).kernel->binary.substr(0, 4) == "\x7f" "ELF");
      }
}

TEST_CASE("the hip backend refuses targets its hipRTC cannot build, before calling it", "[hiprtc]") {
  CHECK_THROWS_WITH(KernelBuilder(make_compiler(BackendKind::hip), "gfx942", {}),
                    Catch::Contains("gfx942") && Catch::Contains("gfx90a"));
}
#else
TEST_CASE("the hip backend is reported as not built", "[hiprtc]") {
  CHECK_THROWS_WITH(make_compiler(BackendKind::hip), Catch::Contains("hip backend was not built"));
}
#endif
