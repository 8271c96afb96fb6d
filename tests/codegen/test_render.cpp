// Rendering: kernel names spell the specialisation; the source carries the activation and its
// parameters exactly; every included template header is collected.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "config/path_requirements.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "codegen/template_library.hpp"
#include "common/diagnostics.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
Activation situv2() { return {ActivationKind::situv2, 4.0f, 25.0f, 0.f}; }
std::vector<std::string> names(const std::vector<KernelSpec>& specs) {
  std::vector<std::string> n;
  for (auto& s : specs) n.push_back(s.name());
  return n;
}
}  // namespace

TEST_CASE("kernel names spell the specialisation (golden)", "[codegen]") {
  CHECK(stage1_portable_spec(situv2(), 64, false).name() == "megamoe_stage1_portable_situv2_bm64_bw64_bc0");
  CHECK(stage1_portable_spec({ActivationKind::silu}, 16, true).name() == "megamoe_stage1_portable_silu_bm16_bw64_bc1");
  CHECK(stage1_portable_spec({ActivationKind::swiglu, 0, 0, 7.f}, 32, false).name() ==
        "megamoe_stage1_portable_swiglu_bm32_bw64_bc0");
  CHECK(stage2_portable_spec(16, CombineWire::bf16, false).name() == "megamoe_stage2_portable_bm16_bw64_bf16_bc0");
  CHECK(stage2_portable_spec(64, CombineWire::fp8_blockwise_1x32, true).name() ==
        "megamoe_stage2_portable_bm64_bw64_fp8x32_bc1");
  CHECK(route_count_spec().name() == "megamoe_route_count");
  CHECK(route_spec().name() == "megamoe_route");
  CHECK(quantize_rows_spec().name() == "megamoe_quantize_rows_fp8x32");
  CHECK(quantize_rows_spec(64).name() == "megamoe_quantize_rows_fp8x64");
  CHECK(dispatch_rows_spec(128, false).name() == "megamoe_dispatch_rows_fp8x128f_bc0");
  CHECK(dispatch_rows_spec(256, true).name() == "megamoe_dispatch_rows_fp8x256f_bc1");
  CHECK(stage1_hopper_spec(situv2(), 160, HopperScales{256}, false).name().find("_x256_bc0") != std::string::npos);
  CHECK(dispatch_rows_spec(kXPerRow, false).name() == "megamoe_dispatch_rows_fp8xrowf_bc0");
  CHECK(hopper_x_block(3584) == 256);
  CHECK(hopper_x_block(768) == 256);
  CHECK(hopper_x_block(384) == 128);
  CHECK(hopper_x_block(640) == 128);
  CHECK(stage1_tensor_core_spec(situv2(), 16, 3584, false).name() == "megamoe_stage1_tensor_core_situv2_bm16_bw128_s8_bc0");
  CHECK(stage2_tensor_core_spec(128, 3072, CombineWire::fp8_blockwise_1x32, true).name() ==
        "megamoe_stage2_tensor_core_bm128_bw128_s4_fp8x32_bc1");
  CHECK(combine_spec(CombineWire::fp8_blockwise_1x32).name() == "megamoe_combine_fp8x32");
}

TEST_CASE("the rendered source calls the template with the config's values", "[codegen]") {
  RenderedKernel k = render(stage1_portable_spec(situv2(), 64, false));
  CHECK(k.name == "megamoe_stage1_portable_situv2_bm64_bw64_bc0");
  CHECK(k.threads == 256);
  CHECK_THAT(k.source, Catch::Contains("extern \"C\" __global__ void __launch_bounds__(256)\n"
                                       "megamoe_stage1_portable_situv2_bm64_bw64_bc0(const megamoe::Stage1Args "
                                       "args) {"));
  CHECK_THAT(k.source, Catch::Contains("static constexpr float beta = 0x1p+2f;"));          // 4.0 exactly
  CHECK_THAT(k.source, Catch::Contains("static constexpr float linear_beta = 0x1.9p+4f;"));  // 25.0 exactly
  CHECK_THAT(k.source, Catch::Contains("megamoe::stage1_portable<megamoe::SiTUv2<ActivationParams>, 64, 64, false>(args);"));

  RenderedKernel sw = render(stage1_portable_spec({ActivationKind::swiglu, 0, 0, 7.f}, 32, true));
  CHECK_THAT(sw.source, Catch::Contains("static constexpr float limit = 0x1.cp+2f;"));  // 7.0
  CHECK_THAT(sw.source, Catch::Contains("megamoe::SwiGLU<ActivationParams>, 32, 64, true>"));
  CHECK_THAT(render(stage2_portable_spec(16, CombineWire::fp8_blockwise_1x32, false)).source,
             Catch::Contains("megamoe::stage2_portable<16, 64, 1, false>"));
}

TEST_CASE("every template header a kernel includes is collected, each once", "[codegen]") {
  RenderedKernel k = render(stage1_portable_spec(situv2(), 64, false));
  std::vector<std::string> paths;
  for (auto& h : k.headers) paths.push_back(h.path);
  CHECK(paths == std::vector<std::string>{"moe/stage1_portable.cuh", "common/activation.cuh",
                                          "prelude/megamoe_prelude.cuh", "interface/scalar_types.cuh",
                                          "interface/kernel_args.cuh", "interface/kernel_constants.cuh",
                                          "moe/epilogue_fp8.cuh", "common/numerics.cuh", "moe/stage_outputs.cuh", "moe/portable_gemm.cuh",
                                          "moe/routed_tiles.cuh", "moe/stage_gate.cuh"});
  for (auto& h : k.headers) CHECK(h.text == std::string(template_text(h.path)));
}

TEST_CASE("an include of a template that does not exist is an error naming it", "[codegen]") {
  CHECK_THROWS_WITH(collect_headers("#include \"moe/nope.cuh\"\n"), Catch::Contains("moe/nope.cuh"));
  CHECK(collect_headers("// #include \"moe/nope.cuh\" in a comment\n").empty());
}

TEST_CASE("a bucket's kernels follow its config values", "[codegen]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  Config k = load_config("kimi_k3_a8w4");
  CHECK(names(kernels_for_bucket(k, k.bucket(8), KernelPath::portable)) ==
        std::vector<std::string>{"megamoe_route_count", "megamoe_route", "megamoe_quantize_rows_fp8x32",
                                 "megamoe_stage1_portable_situv2_bm16_bw64_bc0",
                                 "megamoe_stage2_portable_bm16_bw64_bf16_bc0", "megamoe_combine_bf16"});
  // bm 128 in the config: the portable kernels cap it at 64.
  CHECK(kernels_for_bucket(k, k.bucket(4096), KernelPath::portable)[3].name() == "megamoe_stage1_portable_situv2_bm64_bw64_bc0");
  Config g = load_config("generic_a8w4");
  CHECK(kernels_for_bucket(g, g.bucket(1), KernelPath::portable)[3].name() == "megamoe_stage1_portable_silu_bm64_bw64_bc0");
  CHECK(names(kernels_for_bucket(k, k.bucket(4096), KernelPath::tensor_core)) ==
        std::vector<std::string>{"megamoe_route_count", "megamoe_route", "megamoe_quantize_rows_fp8x64",
                                 "megamoe_stage1_tensor_core_situv2_bm128_bw128_s4_bc0",
                                 "megamoe_stage2_tensor_core_bm128_bw128_s4_bf16_bc0", "megamoe_combine_bf16"});
  // Hopper: as many stages as fit beside the scale/epilogue region; Kimi-K3's scale modes (x per
  // row, h static at 2^-2) in the names.
  CHECK(names(kernels_for_bucket(k, k.bucket(8), KernelPath::hopper)) ==
        std::vector<std::string>{"megamoe_route_count", "megamoe_route", "megamoe_dispatch_rows_fp8xrowf_bc0",
                                 "megamoe_stage1_hopper_situv2_bm16_bw128_s9_b2_xrow_hsm2_bc0",
                                 "megamoe_stage2_hopper_bm16_bw128_s9_b2_hsm2_bf16_bc0", "megamoe_combine_bf16"});
  // Kimi-K3 (h in its static scale), generic_a8w4 (SiLU: h per 128, Stage1 over 256 weight rows)
  // and generic_a8w4 over 128 rows.
  Config g128 = g;
  for (BucketConfig& b : g128.buckets) b.stage1.weight_tile = 128;
  for (const Config* c : {&k, &g, &g128}) {
    for (int b : {8, 4096}) {
      for (auto& spec : kernels_for_bucket(*c, c->bucket(b), KernelPath::hopper)) {
        INFO(spec.name());
        if (!spec.family.ends_with("hopper")) continue;
        // All blocks an SM is to hold fit its 228 KB, with their static shared memory (Stage1: three
        // arrays of floats per token row and two barriers; 1 KB of ptxas's own in both, as the cubins
        // list it) and the 1 KB per block the system keeps.
        const TileShape& tile = spec.family == "stage1_hopper" ? c->bucket(b).stage1 : c->bucket(b).stage2;
        CHECK(spec.threads == (tile.weight_tile == 256 ? 640 : 384));
        CHECK(spec.name().find(fmt::format("_bw{}_", tile.weight_tile)) != std::string::npos);
        CHECK(spec.min_blocks ==
              hopper_blocks_per_sm(hopper_bm(c->bucket(b), spec.family == "stage1_hopper" ? 1 : 2), tile.weight_tile / 128));
        const int static_bytes =
            1024 + (spec.family == "stage1_hopper" ? 3 * hopper_bm(c->bucket(b), 1) * 4 + 16 : 0);
        CHECK(spec.min_blocks * (spec.shared_bytes + static_bytes + 1024) <= 233472);
        // Stage1 with h per 128 over 128 weight rows runs in pairs of blocks (a 128-column block
        // of h spans two tiles), declared in the entry point so that every launch makes them; with
        // h static or 256 rows, no pairs.
        const bool pairs = spec.family == "stage1_hopper" && c->bucket(b).h_scale == HScale::per_block &&
                           tile.weight_tile == 128;
        CHECK(spec.cluster == (pairs ? 2 : 0));
        CHECK((render(spec).source.find("__launch_bounds__(" + std::to_string(spec.threads) + ", " +
                                        std::to_string(spec.min_blocks) + ") __cluster_dims__(2, 1, 1)\n") !=
               std::string::npos) == pairs);
        CHECK((render(spec).source.find("__cluster_dims__") != std::string::npos) == pairs);
      }
    }
  }
}

TEST_CASE("every Hopper token tile fits its SM, and each path maps a config BM to a tile it has", "[codegen]") {
  const Activation act{ActivationKind::situv2, 4.f, 25.f, 0.f};
  // The widest token tile of each stage form over 128 weight rows: 176 where the stage promotes,
  // 256 where it does not, less where kHopperMinStages stages would not fit beside the region
  // (Stage2's 132-float rows; the fp8-resident weights' 16 KB units).
  struct Form {
    int stage;
    bool promotes, resident;
    int widest;
  };
  const Form forms[] = {{1, true, false, 176}, {2, true, false, 176}, {1, false, false, 256}, {2, false, false, 192},
                        {1, true, true, 176},  {2, true, true, 176},  {1, false, true, 224}, {2, false, true, 176}};
  for (const Form& f : forms) {
    INFO("stage " << f.stage << " promotes " << f.promotes << " resident " << f.resident);
    CHECK(hopper_max_bm(f.stage, f.promotes, f.resident, 1) == f.widest);
    BucketConfig b;
    b.x_scale = f.stage == 1 && !f.promotes ? XScale::per_row : XScale::per_block;
    b.h_scale = f.stage == 2 && !f.promotes ? HScale::static_bound : HScale::per_block;
    b.weights = f.resident ? WeightSource::fp8_resident : WeightSource::mxfp4;
    b.stage1 = b.stage2 = TileShape{f.widest, 128};
    CHECK(hopper_bm(b, f.stage) == f.widest);
    b.stage1 = b.stage2 = TileShape{f.widest + 16, 128};
    if (f.widest < 256) CHECK_THROWS_WITH(hopper_bm(b, f.stage), Catch::Contains("token_tile"));
    const HopperScales scales{f.promotes ? 256 : int(kXPerRow), !f.promotes, -2};
    const WeightSource w = b.weights;
    for (int bm = 16; bm <= f.widest; bm += 16) {
      INFO("bm " << bm);
      for (bool ep : {false, true}) {
        const KernelSpec spec = f.stage == 1 ? KernelSpec(stage1_hopper_spec(act, bm, scales, false, ep, w))
                                             : KernelSpec(stage2_hopper_spec(bm, CombineWire::bf16, scales, true, ep, w));
        INFO(spec.name());
        CHECK(spec.min_blocks == (bm <= 48 ? 2 : 1));
        // static shared memory as the cubins list it (Stage1's row maxima and barriers, 1 KB of
        // ptxas's own; over several ranks a few words more), then the driver's 1 KB per block, out
        // of the SM's 228 KB
        const int static_bytes = 1024 + (f.stage == 1 ? 3 * bm * 4 + 16 : 0) + (ep ? 64 : 0);
        CHECK(spec.shared_bytes + static_bytes <= kHopperSharedLimit);
        CHECK(spec.min_blocks * (spec.shared_bytes + static_bytes + 1024) <= 233472);
        // a chunk in use, one landing, one queued
        CHECK(hopper_stages(bm, f.stage, ep, f.resident) >= kHopperMinStages);
      }
    }
  }
  for (int bm = 16; bm <= 256; bm += 16) {
    INFO("config bm " << bm);
    // 256 weight rows a block: four consumer warpgroups (640 threads) at one block per SM, up to
    // kHopperMaxBmWide tokens; h static and x per row (no promotion), no clusters.
    if (bm <= kHopperMaxBmWide) {
      const HopperScales none{kXPerRow, true, -2};
      for (const KernelSpec& spec :
           std::vector<KernelSpec>{stage1_hopper_spec(act, bm, none, false, false, WeightSource::mxfp4, 2),
                                   stage2_hopper_spec(bm, CombineWire::bf16, none, false, false, WeightSource::mxfp4, 2)}) {
        INFO(spec.name());
        const int stage = spec.family == "stage1_hopper" ? 1 : 2;
        CHECK(spec.threads == 640);
        CHECK(spec.min_blocks == 1);
        CHECK(spec.cluster == 0);
        CHECK(spec.name().find("_bw256_") != std::string::npos);
        const int static_bytes = 1024 + (stage == 1 ? 3 * bm * 4 + 16 : 0);
        CHECK(spec.shared_bytes + static_bytes <= kHopperSharedLimit);
        CHECK(spec.shared_bytes == hopper_dynamic_smem_bytes(bm, hopper_stages(bm, stage, false, false, 2),
                                                             hopper_region_ld(stage, 2), false, 2));
        CHECK(hopper_stages(bm, stage, false, false, 2) >= 3);
        CHECK(render(spec).source.find("__launch_bounds__(640, 1)\n") != std::string::npos);
      }
    }
    // The other paths' tiles are powers of two: the config's BM rounded up, capped.
    const int tc = tensor_core_bm(bm), pb = portable_bm(bm);
    CHECK((tc & (tc - 1)) == 0);
    CHECK(tc >= std::min(bm, 128));
    CHECK(tc <= 128);
    CHECK((pb & (pb - 1)) == 0);
    CHECK(pb == std::min(tc, 64));
  }
}

TEST_CASE("a model with shared experts launches shared_routes first, on one GPU and over several ranks", "[codegen][shared]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  const Config k = load_config("kimi_k3_a8w4"), s = with_shared_experts(k, 1);
  for (KernelPath path : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper})
    for (int world : {1, 2}) {
      const std::vector<std::string> plain = names(kernels_for_bucket(k, k.bucket(64), path, world));
      std::vector<std::string> with = names(kernels_for_bucket(s, s.bucket(64), path, world));
      REQUIRE(with.size() == plain.size() + 1);
      CHECK(with[0] == "megamoe_shared_routes");
      with.erase(with.begin());
      CHECK(with == plain);  // the other kernels are the same
    }
  CHECK(shared_routes_blocks(0, 132) == 1);
  CHECK(shared_routes_blocks(256, 132) == 1);
  CHECK(shared_routes_blocks(257, 132) == 2);
  CHECK(shared_routes_blocks(1LL << 30, 132) == 4 * 132);
}

TEST_CASE("routing takes one block per 2048 slots, at least one and at most 256", "[codegen]") {
  CHECK(route_blocks(0) == 1);
  CHECK(route_blocks(1) == 1);
  CHECK(route_blocks(2048) == 1);
  CHECK(route_blocks(2049) == 2);
  CHECK(route_blocks(8192LL * 16) == 64);   // Kimi-K3 at 8192 tokens
  CHECK(route_blocks(32768LL * 16) == 256);  // the largest bucket
  CHECK(route_blocks(1LL << 40) == 256);
  // Each block's counts row fits the shared arrays route scans (one thread per expert).
  CHECK(route_spec().threads == 1024);
  CHECK(route_count_spec().threads == 1024);
}

TEST_CASE("a launch bound with a block count is rendered with it", "[codegen]") {
  KernelSpec s = stage2_hopper_spec(64, CombineWire::bf16, {}, false);
  CHECK(render(s).source.find("__launch_bounds__(384, 1)") != std::string::npos);
  CHECK(render(route_spec()).source.find("__launch_bounds__(1024)\n") != std::string::npos);
}

TEST_CASE("the kernel path follows the backend, the arch and the shape", "[codegen]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  const Config kimi = load_config("kimi_k3_a8w4");
  Config odd = kimi;
  odd.name = "odd";
  odd.model = ModelShape{.experts = 4, .experts_per_rank = 4, .model_dim = 192, .inter_dim = 64, .topk = 2};
  CHECK(resolve_path(KernelPath::automatic, kimi, BackendKind::cuda, "sm_90a") == KernelPath::hopper);
  CHECK(resolve_path(KernelPath::automatic, kimi, BackendKind::cuda, "sm_100") == KernelPath::tensor_core);
  CHECK(resolve_path(KernelPath::tensor_core, kimi, BackendKind::cuda, "sm_90a") == KernelPath::tensor_core);
  CHECK_THROWS_WITH(resolve_path(KernelPath::hopper, kimi, BackendKind::cuda, "sm_89"),
                    Catch::Contains("hopper") && Catch::Contains("sm_89"));
  CHECK_THROWS_WITH(resolve_path(KernelPath::hopper, kimi, BackendKind::hip, "gfx90a"), Catch::Contains("gfx90a"));
  CHECK(resolve_path(KernelPath::automatic, kimi, BackendKind::cuda, "sm_80") == KernelPath::portable);
  CHECK(resolve_path(KernelPath::automatic, kimi, BackendKind::hip, "gfx90a") == KernelPath::portable);
  // A shape off the 128 grid runs the fast paths padded (padded_model), not a slower path.
  CHECK(resolve_path(KernelPath::automatic, odd, BackendKind::cuda, "sm_90a") == KernelPath::hopper);
  CHECK(resolve_path(KernelPath::portable, kimi, BackendKind::cuda, "sm_90a") == KernelPath::portable);
  CHECK(resolve_path(KernelPath::tensor_core, odd, BackendKind::cuda, "sm_90a") == KernelPath::tensor_core);
}

TEST_CASE("a path pads the model's dims up to its multiple, and only those", "[codegen]") {
  const ModelShape gpt_oss{.experts = 128, .experts_per_rank = 128, .model_dim = 2880, .inter_dim = 2880, .topk = 4};
  for (KernelPath path : {KernelPath::hopper, KernelPath::tensor_core}) {
    const ModelShape p = padded_model(path, gpt_oss);
    CHECK(p.model_dim == 2944);  // 23 x 128: the next multiple
    CHECK(p.inter_dim == 2944);
    CHECK(p.experts == 128);
    CHECK(p.topk == 4);
  }
  const ModelShape portable = padded_model(KernelPath::portable, gpt_oss);  // 2880 is 45 x 64: as it is
  CHECK(portable.model_dim == 2880);
  CHECK(portable.inter_dim == 2880);
  const ModelShape mixed{.experts = 8, .experts_per_rank = 8, .model_dim = 4096, .inter_dim = 1472, .topk = 2};
  CHECK(padded_model(KernelPath::hopper, mixed).model_dim == 4096);
  CHECK(padded_model(KernelPath::hopper, mixed).inter_dim == 1536);
}

TEST_CASE("automatic says why it runs a path slower than the GPU's fastest, and only then", "[codegen]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  const Config kimi = load_config("kimi_k3_a8w4");
  // The fastest path the GPU has runs: nothing to say; nor where the GPU has no faster path.
  CHECK(choose_path(KernelPath::automatic, kimi, BackendKind::cuda, "sm_90a").note.empty());
  CHECK(choose_path(KernelPath::automatic, kimi, BackendKind::cuda, "sm_80").note.empty());
  CHECK(choose_path(KernelPath::automatic, kimi, BackendKind::hip, "gfx90a").note.empty());
  // A path asked for by name runs as asked.
  CHECK(choose_path(KernelPath::portable, kimi, BackendKind::cuda, "sm_90a").note.empty());

  // A shape off the 128 grid: the Hopper path, padded, and the note says to what and what it costs
  // (2944 x 3072 over 2880 x 3072: 2.2% more), whether the path was asked for or not.
  Config odd = kimi;
  odd.name = "odd";
  odd.model.model_dim = 2880;  // a multiple of 64, not of 128
  const PathChoice c = choose_path(KernelPath::automatic, odd, BackendKind::cuda, "sm_90a");
  CHECK(c.path == KernelPath::hopper);
  CHECK_THAT(c.note, Catch::Contains("config odd runs the hopper path at model_dim 2880 and inter_dim 3072") &&
                         Catch::Contains("padded with zeros to 2944 and 3072") &&
                         Catch::Contains("multiples of 128") && Catch::Contains("2.2% more GEMM work"));
  CHECK_THAT(choose_path(KernelPath::tensor_core, odd, BackendKind::cuda, "sm_90a").note,
             Catch::Contains("runs the tensor_core path") && Catch::Contains("2944"));
  CHECK(choose_path(KernelPath::portable, odd, BackendKind::cuda, "sm_90a").note.empty());  // 2880 is 45 x 64

  // The tensor-core kernels' shared memory grows with K: Kimi-K3's widest tiles (128 tokens,
  // K 3584) need more than an sm_89 block may have (99 KB), not more than an sm_100 block (227 KB).
  const PathChoice ada = choose_path(KernelPath::automatic, kimi, BackendKind::cuda, "sm_89");
  CHECK(ada.path == KernelPath::portable);
  CHECK_THAT(ada.note, Catch::Contains("shared memory") && Catch::Contains("101376"));
  CHECK_THROWS_WITH(resolve_path(KernelPath::tensor_core, kimi, BackendKind::cuda, "sm_89"),
                    Catch::Contains("shared memory"));
  Config small_tiles = kimi;
  for (BucketConfig& b : small_tiles.buckets) b.stage1.token_tile = b.stage2.token_tile = 16;
  CHECK(resolve_path(KernelPath::automatic, small_tiles, BackendKind::cuda, "sm_89") == KernelPath::tensor_core);

  // Said once per process for each distinct note, through the warning handler.
  std::vector<std::string> said;
  WarningHandler old = set_warning_handler([&](const std::string& m) { said.push_back(m); });
  announce_path_choice(c);
  announce_path_choice(c);
  announce_path_choice(ada);
  set_warning_handler(old);
  REQUIRE(said.size() == 2);
  CHECK(said[0] == c.note);
}

TEST_CASE("each path's arithmetic is what its kernels are rendered for", "[codegen]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config k = load_config("kimi_k3_a8w4");
  for (BucketConfig& b : k.buckets) b.x_scale = XScale::per_block, b.h_scale = HScale::per_block;
  const BucketConfig& b64 = k.bucket(64);
  const PathArithmetic hopper = path_arithmetic(KernelPath::hopper, k, b64);
  CHECK(hopper.x == 256);
  CHECK(hopper.h == 128);
  CHECK(!hopper.h_static);
  CHECK(hopper.accumulation == Accumulation::sm90_fp8_mma);
  const PathArithmetic tc = path_arithmetic(KernelPath::tensor_core, k, b64);
  CHECK((tc.x == 64 && tc.h == 64 && tc.accumulation == Accumulation::exact));
  const PathArithmetic portable = path_arithmetic(KernelPath::portable, k, b64);
  CHECK((portable.x == 32 && portable.h == 32 && portable.accumulation == Accumulation::exact));
  Config odd = k;
  odd.model = ModelShape{.experts = 4, .experts_per_rank = 4, .model_dim = 384, .inter_dim = 640, .topk = 2};
  CHECK(path_arithmetic(KernelPath::hopper, odd, odd.bucket(64)).x == 128);  // 384 is not a multiple of 256
  for (KernelPath p : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper}) {
    const LayerKernels lk = layer_kernels(k, b64, p);
    INFO(to_string(p));
    const PathArithmetic a = path_arithmetic(p, k, b64);
    CHECK(lk.arithmetic.x == a.x);
    CHECK(lk.arithmetic.h == a.h);
    // the x quantizer's name spells its block
    const std::vector<KernelSpec> all = lk.all();
    CHECK(all[2].name().find("fp8x" + std::to_string(a.x)) != std::string::npos);
  }
  CHECK(std::get<HopperKernelSet<TypedSpec>>(layer_kernels(k, b64, KernelPath::hopper).path).stage1.name().find("_x256_") !=
        std::string::npos);
}

TEST_CASE("the scale modes of a bucket: the Hopper path's arithmetic and kernel names, the other paths' unchanged",
          "[codegen]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config k = load_config("kimi_k3_a8w4");
  BucketConfig b = k.bucket(64);
  b.x_scale = XScale::per_row, b.h_scale = HScale::static_bound;
  const PathArithmetic a = path_arithmetic(KernelPath::hopper, k, b);
  CHECK(a.x == k.model.model_dim);  // one scale per row
  CHECK(a.h_static);
  const HopperScales s = hopper_scales(k, b);
  CHECK(s.x_block == kXPerRow);
  CHECK(s.h_exponent == -2);  // SiTUv2 4 x 25: |h| < 100, and 100 x 2^2 <= 448
  const HopperKernelSet<TypedSpec> h = std::get<HopperKernelSet<TypedSpec>>(layer_kernels(k, b, KernelPath::hopper).path);
  CHECK(h.dispatch.name() == "megamoe_dispatch_rows_fp8xrowf_bc0");
  CHECK(h.stage1.name().find("_xrow_hsm2_bc0") != std::string::npos);
  CHECK(h.stage2.name().find("_hsm2_bf16_bc0") != std::string::npos);
  // the other paths keep their own blocks
  const PathArithmetic tc = path_arithmetic(KernelPath::tensor_core, k, b);
  CHECK((tc.x == 64 && tc.h == 64 && !tc.h_static));
  CHECK(!path_arithmetic(KernelPath::portable, k, b).h_static);
  // SwiGLU's bound is limit^2
  Config sw = k;
  sw.activation = {ActivationKind::swiglu, 0.f, 0.f, 7.f};
  CHECK(hopper_scales(sw, b).h_exponent == -3);  // 49 x 2^3 = 392 <= 448
  // SiLU has none: a static scale is an error naming it
  Config silu = k;
  silu.activation = {ActivationKind::silu};
  CHECK_THROWS_WITH(hopper_scales(silu, b), Catch::Contains("h_scale static") && Catch::Contains("silu"));
}
