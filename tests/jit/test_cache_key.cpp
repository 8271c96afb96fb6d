// Cache keys change when, and only when, one of their inputs changes.
#include <catch2/catch.hpp>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "jit/cache_key.hpp"
#include "jit/kernel_builder.hpp"

using namespace megamoe;

namespace {
CacheKeyParts base() {
  CacheKeyParts p;
  p.name = "megamoe_stage1_portable_silu_bm64_bw64_bc0";
  p.compiler = "nvrtc 13.0";
  p.arch = "sm_90a";
  p.options = {"--gpu-architecture=sm_90a", "--std=c++17"};
  p.source = "extern \"C\" __global__ void k() {}\n";
  p.headers = {{"a.cuh", "// a\n"}, {"b.cuh", "// b\n"}};
  return p;
}
}  // namespace

TEST_CASE("a cache key is stable for the same inputs (golden)", "[jit][key]") {
  CacheKey k = make_cache_key(base());
  CHECK(k.hex == make_cache_key(base()).hex);
  CHECK(k.hex.size() == 32);
  CHECK(k.entry_name() == "megamoe_stage1_portable_silu_bm64_bw64_bc0_" + k.hex.substr(0, 16));
  // Pinned: a change here means every user's cache is invalidated; bump kGeneratorVersion
  // or kCacheFormatVersion deliberately instead.
  CHECK(k.hex == "3256677bf31346b9d4c2e2a0ee200bfb");  // for the name above
}

TEST_CASE("a cache key changes with each of its inputs", "[jit][key]") {
  const std::string k0 = make_cache_key(base()).hex;
  auto differs = [&](auto mutate) {
    CacheKeyParts p = base();
    mutate(p);
    return make_cache_key(p).hex != k0;
  };
  CHECK(differs([](CacheKeyParts& p) { p.name += "x"; }));
  CHECK(differs([](CacheKeyParts& p) { p.generator = "megamoe-codegen/2"; }));
  CHECK(differs([](CacheKeyParts& p) { p.cache_format = 2; }));
  CHECK(differs([](CacheKeyParts& p) { p.compiler = "nvrtc 13.1"; }));
  CHECK(differs([](CacheKeyParts& p) { p.arch = "sm_100a"; }));
  CHECK(differs([](CacheKeyParts& p) { p.options.push_back("-lineinfo"); }));
  CHECK(differs([](CacheKeyParts& p) { p.options[1] = "--std=c++20"; }));
  CHECK(differs([](CacheKeyParts& p) { p.source += " "; }));
  CHECK(differs([](CacheKeyParts& p) { p.headers[1].text += " "; }));
  CHECK(differs([](CacheKeyParts& p) { p.headers[0].path = "c.cuh"; }));
  CHECK(differs([](CacheKeyParts& p) { p.headers.pop_back(); }));
  // Field boundaries are unambiguous: moving a character between fields changes the key.
  CHECK(differs([](CacheKeyParts& p) { p.options = {"--gpu-architecture=sm_90a--std=c++17"}; }));
}

TEST_CASE("kernel keys cover the activation and its parameters, and nothing unrelated", "[jit][key]") {
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", {});
  Activation s{ActivationKind::situv2, 4.0f, 25.0f, 0.f};
  const std::string k0 = b.plan(stage1_portable_spec(s, 64, false)).key.hex;
  CHECK(b.plan(stage1_portable_spec(s, 64, false)).key.hex == k0);
  CHECK(b.plan(stage1_portable_spec({ActivationKind::silu}, 64, false)).key.hex != k0);
  Activation s2 = s;
  s2.beta = 4.5f;  // same name, other parameter: another key
  PlannedKernel p2 = b.plan(stage1_portable_spec(s2, 64, false));
  CHECK(p2.rendered.name == "megamoe_stage1_portable_situv2_bm64_bw64_bc0");
  CHECK(p2.key.hex != k0);
  CHECK(b.plan(stage1_portable_spec(s, 64, true)).key.hex != k0);
  CHECK(b.plan(stage1_portable_spec(s, 32, false)).key.hex != k0);
  KernelBuilder other_arch(make_compiler(BackendKind::cuda), "sm_100a", {});
  CHECK(other_arch.plan(stage1_portable_spec(s, 64, false)).key.hex != k0);
}
