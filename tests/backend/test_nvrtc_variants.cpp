// NVRTC compiles every kernel variant of every built-in config for sm_90a (every card's bucket
// table), checked and unchecked, on one GPU and over several ranks, and of each activation; and
// every Hopper token-tile width, with ptxas keeping its wgmma asynchronous. The variant checks
// share the run's kernel cache (test::compile_check_cache): a kernel several configs launch
// compiles once a run.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "jit/kernel_builder.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {

// Configs that share kernels (same activation and tiles) compile them once.
void compile_all_variants(std::initializer_list<const char*> config_names) {
  test::ScopedEnv no_cfg("MEGAMOE_CONFIG_DIR", std::nullopt);
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", test::compile_check_cache());
  std::set<std::string> done;
  for (const char* config_name : config_names) {
    for (const char* bc : {"0", "1"}) {
      test::ScopedEnv env("MEGAMOE_BOUNDS_CHECK", std::string(bc));
      for (const Config& c : configs_for_tables(load_config(config_name)))  // each card's table
      for (auto& bucket : c.buckets)
        for (KernelPath path : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper})
        for (int world : {1, 2})  // on one GPU, and as a rank of an expert-parallel group
        for (auto& spec : kernels_for_bucket(c, bucket, path, world)) {
          PlannedKernel p = b.plan(spec);
          if (!done.insert(p.key.hex).second) continue;
          INFO(p.rendered.name);
          BuildReport r = b.build(p);
          CHECK(r.origin != BuildOrigin::memory);  // compiled, here or by another test of this run
          CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
        }
    }
  }
  CHECK(done.size() >= 2);
}

void compile_activation(Activation act) {
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", test::compile_check_cache());
  for (bool bc : {false, true}) {
    for (int bm : {16, 64}) {
      BuildReport r = b.build(stage1_portable_spec(act, bm, bc));
      CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
    }
    for (int bm : {8, 128}) {
      BuildReport r = b.build(stage1_tensor_core_spec(act, bm, 3584, bc));
      CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
    }
    // the Hopper token tiles' ends, x in blocks of one and of two chunks and per row; h per 128
    // and, where the activation is bounded, static
    const bool bounded = std::isfinite(activation_bound(act));
    for (int x_block : {128, 256, int(kXPerRow)})
      for (int bm : {16, hopper_max_bm(1, x_block != kXPerRow, false, 1)})
        for (bool h_static : {false, true}) {
          if (h_static && !bounded) continue;
          HopperScales scales{x_block, h_static, h_static ? -2 : 0};
          BuildReport r = b.build(stage1_hopper_spec(act, bm, scales, bc));
          CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
        }
  }
}

}  // namespace

TEST_CASE("NVRTC compiles every kimi_k3_a8w4 variant for sm_90a", "[nvrtc][situv2]") {
  compile_all_variants({"kimi_k3_a8w4"});
}
TEST_CASE("NVRTC compiles every generic_a8w4 variant for sm_90a", "[nvrtc][silu]") {
  compile_all_variants({"generic_a8w4"});
}
TEST_CASE("NVRTC compiles every deepseek_v3_a8w4 variant for sm_90a", "[nvrtc][silu]") {
  compile_all_variants({"deepseek_v3_a8w4"});
}
TEST_CASE("NVRTC compiles every kimi_k2_a8w4 variant for sm_90a", "[nvrtc][silu]") {
  compile_all_variants({"kimi_k2_a8w4"});
}
TEST_CASE("NVRTC compiles every qwen3_235b_a8w4 variant for sm_90a", "[nvrtc][silu]") {
  compile_all_variants({"qwen3_235b_a8w4"});
}
TEST_CASE("NVRTC compiles every gpt_oss_120b_a8w4 and gpt_oss_20b_a8w4 variant for sm_90a", "[nvrtc][swiglu]") {
  compile_all_variants({"gpt_oss_120b_a8w4", "gpt_oss_20b_a8w4"});
}
TEST_CASE("NVRTC compiles a model's kernels with shared experts for sm_90a", "[nvrtc][shared]") {
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", test::compile_check_cache());
  for (const char* bc : {"0", "1"}) {
    test::ScopedEnv env("MEGAMOE_BOUNDS_CHECK", std::string(bc));
    const Config c = with_shared_experts(load_config("deepseek_v3_a8w4"), 1);
    const std::vector<KernelSpec> specs = kernels_for_bucket(c, c.bucket(64), KernelPath::hopper, 2);
    REQUIRE(specs[0].family == "shared_routes");
    for (const KernelSpec& spec : specs) {
      BuildReport r = b.build(spec);
      INFO(r.kernel->symbol);
      CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
    }
  }
}

TEST_CASE("NVRTC compiles the silu Stage1 kernels", "[nvrtc][silu]") { compile_activation({ActivationKind::silu}); }
TEST_CASE("NVRTC compiles the situv2 Stage1 kernels", "[nvrtc][situv2]") {
  compile_activation({ActivationKind::situv2, 4.f, 25.f, 0.f});
}
TEST_CASE("NVRTC compiles the swiglu Stage1 kernels", "[nvrtc][swiglu]") {
  compile_activation({ActivationKind::swiglu, 0.f, 0.f, 7.f});
}

// ptxas serialises wgmma (each followed by a wait for all) when it finds accumulator registers
// read while a wgmma group may be in flight (C7514) or too few registers for them (C7512), and
// says so only as info: the kernels then run, correct and slow. Every width either stage can take
// (hopper_max_bm of its form), mxfp4 and fp8-resident, is compiled with -v and checked.
TEST_CASE("NVRTC compiles every Hopper token tile, and ptxas keeps the wgmma asynchronous", "[nvrtc][hopper]") {
  std::shared_ptr<const Compiler> compiler = make_compiler(BackendKind::cuda);
  KernelBuilder b(compiler, "sm_90a", {});
  const Activation act{ActivationKind::situv2, 4.f, 25.f, 0.f};
  std::vector<KernelSpec> specs;
  const HopperScales x256{256}, x128{128}, none_promoted{kXPerRow, true, -2};  // x per row, h static
  constexpr int promoted = kHopperMaxBmPromoted;
  for (int bm = 16; bm <= promoted; bm += 16) specs.push_back(stage1_hopper_spec(act, bm, x256, false));
  for (int bm : {16, 64, promoted}) specs.push_back(stage1_hopper_spec(act, bm, x128, false));  // x per chunk
  for (int bm = 16; bm <= promoted; bm += 16) specs.push_back(stage2_hopper_spec(bm, CombineWire::bf16, x256, false));
  // With no promotion: every width of the MXFP4 kernels, Stage1's up to 256 tokens; the fp8 wire
  // at the widest.
  for (int bm = 16; bm <= hopper_max_bm(1, false, false, 1); bm += 16)
    specs.push_back(stage1_hopper_spec(act, bm, none_promoted, false));
  for (int bm = 16; bm <= hopper_max_bm(2, false, false, 1); bm += 16)
    specs.push_back(stage2_hopper_spec(bm, CombineWire::bf16, none_promoted, false));
  specs.push_back(stage2_hopper_spec(hopper_max_bm(2, false, false, 1), CombineWire::fp8_blockwise_1x32, none_promoted, false));
  // 256 weight rows a block (four consumer warpgroups, no promotion) at every width up to
  // kHopperMaxBmWide; Stage1 also with h per 128 (a tile's own row maxima).
  const HopperScales x_row{kXPerRow};
  for (int bm = 16; bm <= kHopperMaxBmWide; bm += 16) {
    specs.push_back(stage1_hopper_spec(act, bm, none_promoted, false, false, WeightSource::mxfp4, 2));
    specs.push_back(stage2_hopper_spec(bm, CombineWire::bf16, none_promoted, false, false, WeightSource::mxfp4, 2));
  }
  for (int bm : {16, int(kHopperMaxBmWide)}) {
    specs.push_back(stage1_hopper_spec(act, bm, x_row, false, false, WeightSource::mxfp4, 2));
    specs.push_back(stage2_hopper_spec(bm, CombineWire::fp8_blockwise_1x32, none_promoted, false, false,
                                       WeightSource::mxfp4, 2));
  }
  // The fp8-resident kernels (both operands from shared memory) at every width.
  const WeightSource res = WeightSource::fp8_resident;
  for (int bm = 16; bm <= promoted; bm += 16) specs.push_back(stage1_hopper_spec(act, bm, x256, false, false, res));
  for (int bm : {16, 64, promoted}) specs.push_back(stage1_hopper_spec(act, bm, x128, false, false, res));
  for (int bm = 16; bm <= promoted; bm += 16)
    specs.push_back(stage2_hopper_spec(bm, CombineWire::bf16, x256, false, false, res));
  for (int bm : {16, 64, 160, hopper_max_bm(1, false, true, 1)})
    specs.push_back(stage1_hopper_spec(act, bm, none_promoted, false, false, res));
  for (int bm : {16, 64, 160, hopper_max_bm(2, false, true, 1)})
    specs.push_back(stage2_hopper_spec(bm, CombineWire::bf16, none_promoted, false, false, res));
  for (const KernelSpec& spec : specs) {
    PlannedKernel p = b.plan(spec);
    CompileInput in{p.rendered.name, p.rendered.source, p.rendered.headers, p.options};
    in.options.push_back("--ptxas-options=-v");
    CompileOutput out = compiler->compile(in);
    INFO(p.rendered.name << "\n" << out.log);
    REQUIRE(out.ok);
    CHECK(out.log.find("ptxas info") != std::string::npos);  // the -v report is there to read
    CHECK(out.log.find("C7514") == std::string::npos);  // "wgmma.mma_async ... serialized due to ... reading"
    CHECK(out.log.find("C7512") == std::string::npos);  // "... serialized due to insufficient register resources"
    CHECK(out.log.find("serialized") == std::string::npos);
  }
}

TEST_CASE("NVRTC compiles megamoe-bench's flag ping-pong kernel", "[nvrtc]") {
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", {});
  BuildReport r = b.build(flag_pingpong_spec());
  CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
  CHECK(r.kernel->symbol == "megamoe_flag_pingpong");
}

TEST_CASE("NVRTC refuses an arch it does not know, naming it", "[nvrtc]") {
  CHECK_THROWS_WITH(KernelBuilder(make_compiler(BackendKind::cuda), "sm_12345", {}),
                    Catch::Contains("sm_12345") && Catch::Contains("sm_90"));
  CHECK_THROWS_WITH(KernelBuilder(make_compiler(BackendKind::cuda), "gfx90a", {}), Catch::Contains("gfx90a"));
}
