// megamoe-precompile: help, usage errors, --list, --dry-run, and a real precompile twice
// (the second run all hits).
#include <catch2/catch.hpp>

#include <regex>

#include <nlohmann/json.hpp>

#include "support/test_support.hpp"

using namespace megamoe;

namespace {

struct Result {
  int status;
  std::string out;
};

Result precompile(const std::string& cache, const std::string& args) {
  Result r;
  std::string cmd = "env -u MEGAMOE_CONFIG_DIR -u MEGAMOE_BOUNDS_CHECK -u MEGAMOE_DISABLE_CACHE MEGAMOE_CACHE_DIR='" +
                    cache + "' '" MEGAMOE_PRECOMPILE_EXE "' " + args;
  r.status = test::run_command(cmd, r.out);
  return r;
}

int count(const std::string& text, const std::string& re) {
  std::regex r(re);
  return int(std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("precompile --help and usage errors", "[cli]") {
  test::TempDir dir;
  Result help = precompile(dir.path().string(), "--help");
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Catch::Contains("Usage: megamoe-precompile [OPTIONS]") && Catch::Contains("--dry-run"));
  Result none = precompile(dir.path().string(), "");
  CHECK(none.status == 2);
  CHECK_THAT(none.out, Catch::Contains("megamoe-precompile: --config is required"));
  Result neither = precompile(dir.path().string(), "--config kimi_k3_a8w4");
  CHECK(neither.status == 2);
  CHECK_THAT(neither.out, Catch::Contains("either --bucket N"));
  Result both = precompile(dir.path().string(), "--config kimi_k3_a8w4 --all --bucket 8");
  CHECK(both.status == 2);
  CHECK_THAT(both.out, Catch::Contains("--all excludes --bucket") || Catch::Contains("--bucket excludes --all"));
  Result jobs = precompile(dir.path().string(), "--config kimi_k3_a8w4 --all -j 0");
  CHECK(jobs.status == 2);
  CHECK_THAT(jobs.out, Catch::Contains("-j: expects a count of at least 1, got '0'"));
  CHECK(precompile(dir.path().string(), "--config kimi_k3_a8w4 --frobnicate").status == 2);
  Result bad_bucket = precompile(dir.path().string(), "--config kimi_k3_a8w4 --bucket 3");
  CHECK(bad_bucket.status == 1);
  CHECK_THAT(bad_bucket.out, Catch::Contains("no bucket 3"));
  Result bad_config = precompile(dir.path().string(), "--config nope --all");
  CHECK(bad_config.status == 1);
  CHECK_THAT(bad_config.out, Catch::Contains("no config named 'nope'"));
}

TEST_CASE("precompile --list and --dry-run compile nothing", "[cli]") {
  test::TempDir dir;
  Result list = precompile(dir.path().string(), "--config kimi_k3_a8w4 --all --list --path portable");
  REQUIRE(list.status == 0);
  CHECK_THAT(list.out, Catch::Contains("megamoe_stage1_portable_situv2_bm16_bw64_bc0"));
  CHECK_THAT(list.out, Catch::Contains("buckets 1,2,4,8,16,32,64\n"));
  CHECK_THAT(list.out, Catch::Contains("buckets 256,512,1024,2048,4096,8192,16384,32768\n"));
  CHECK(count(list.out, "\nmegamoe_") == 10);  // route_count, route, quantize, 3 x stage1, 3 x stage2, combine
  // The counts below are of the default table's kernels (the H200's; every table's: [tables]).
  Result dry = precompile(dir.path().string(), "--config kimi_k3_a8w4 --bucket-table default --all --dry-run");
  CHECK(dry.status == 0);
  // sm_90a: the Hopper path: route_count, route, dispatch, combine; Stage1 16 / 32w / 64w / 96w from
  // MXFP4 (w: over 256 weight rows) and 176 / 160 / 208 fp8-resident; Stage2 16 / 32 / 64w / 96 and
  // 160 / 176 fp8-resident.
  CHECK(count(dry.out, "would compile") == 17);
  Result both = precompile(dir.path().string(), "--config kimi_k3_a8w4 --bucket-table default --all --list --path all");
  CHECK(count(both.out, "\nmegamoe_") == 33);  // route_count, route, combine shared; 3 quantizers, 6 + 8 + 13 stages
  CHECK_THAT(both.out, Catch::Contains("megamoe_stage1_tensor_core_situv2_bm128_bw128_s4_bc0"));
  CHECK_THAT(both.out, Catch::Contains("megamoe_stage1_hopper_situv2_bm96_bw256_s5_b1_xrow_hsm2_bc0"));
  CHECK_THAT(both.out, Catch::Contains("megamoe_stage1_hopper_situv2_bm208_bw128_s3_b1_fp8res_xrow_hsm2_bc0"));
  CHECK(precompile(dir.path().string(), "--config kimi_k3_a8w4 --all --list --path fast").status == 2);
  // Kimi-K3's model with generic_a8w4's one tile shape (bm 64) in every bucket.
  Result against = precompile(dir.path().string(), "--config kimi_k3_a8w4 --buckets-of generic_a8w4 --all --list");
  REQUIRE(against.status == 0);
  CHECK_THAT(against.out, Catch::Contains("config kimi_k3_a8w4_with_generic_a8w4_buckets"));
  CHECK_THAT(against.out, Catch::Contains("megamoe_stage1_hopper_situv2_bm64_"));
  CHECK(count(against.out, "\nmegamoe_stage1_") == 1);
  CHECK(precompile(dir.path().string(), "--config kimi_k3_a8w4 --buckets-of nope --all --list").status == 1);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "v1"));
}

TEST_CASE("precompile twice: first compiles, second all hits", "[cli][silu]") {
  test::TempDir dir;
  Result first = precompile(dir.path().string(), "--config generic_a8w4 --all -j 2");
  INFO(first.out);
  REQUIRE(first.status == 0);
  CHECK(count(first.out, R"(\[\d/6\] compiled megamoe_)") == 6);  // progress lines
  CHECK(count(first.out, R"(\n\S+ +[0-9a-f]{16} compiled +\d+\.\d(?=\n))") == 6);   // table rows
  CHECK_THAT(first.out, Catch::Contains("6 kernel(s): 0 failed"));

  Result second = precompile(dir.path().string(), "--config generic_a8w4 --all -j 2");
  INFO(second.out);
  REQUIRE(second.status == 0);
  CHECK(count(second.out, R"(\n\S+ +[0-9a-f]{16} hit +\d+\.\d(?=\n))") == 6);
  CHECK(count(second.out, " compiled ") == 0);
  Result dry = precompile(dir.path().string(), "--config generic_a8w4 --all --dry-run");
  CHECK(count(dry.out, "cached") == 6);

  // An entry damaged on disk is not "cached": --dry-run names it corrupt, and moves nothing.
  std::filesystem::path entry;
  for (const auto& v : std::filesystem::directory_iterator(dir.path()))
    for (const auto& e : std::filesystem::directory_iterator(v.path()))
      if (e.is_directory() && e.path().filename().string().rfind("megamoe_", 0) == 0) entry = e.path();
  REQUIRE(!entry.empty());
  for (const auto& f : std::filesystem::directory_iterator(entry))
    if (f.path().filename() != "manifest.json") test::write_text(f.path(), "damaged");
  Result damaged = precompile(dir.path().string(), "--config generic_a8w4 --all --dry-run");
  CHECK(count(damaged.out, "cached") == 5);
  CHECK(count(damaged.out, "would compile \\(its entry is corrupt: ") == 1);
  CHECK(std::filesystem::exists(entry));
}

TEST_CASE("precompile and megamoe-workspace say where a path runs the model padded", "[cli]") {
  test::TempDir dir;
  Result dry = precompile(dir.path().string(), "--config gpt_oss_120b_a8w4 --bucket 8 --dry-run --path hopper");
  CHECK(dry.status == 0);
  CHECK_THAT(dry.out, Catch::Contains("at model_dim 2880 and inter_dim 2880 padded with zeros to 2944 and 2944"));
  Result kimi = precompile(dir.path().string(), "--config kimi_k3_a8w4 --bucket 8 --dry-run --path hopper");
  CHECK_THAT(kimi.out, !Catch::Contains("padded"));
  std::string out;
  CHECK(test::run_command("'" MEGAMOE_WORKSPACE_EXE "' --config gpt_oss_120b_a8w4 --path hopper", out) == 0);
  CHECK_THAT(out, Catch::Contains("padded with zeros to 2944 and 2944"));
}

TEST_CASE("precompile refuses, before compiling, a cache it cannot write and a world the runtime refuses", "[cli]") {
  test::TempDir dir;
  const std::filesystem::path file = dir.path() / "not_a_folder";
  test::write_text(file, "");
  Result unwritable = precompile(file.string(), "--config generic_a8w4 --bucket 8");
  CHECK(unwritable.status == 1);
  CHECK_THAT(unwritable.out, Catch::Contains("the kernel cache " + file.string() + " is not writable"));
  CHECK_THAT(unwritable.out, Catch::Contains("nothing would be saved"));
  CHECK(count(unwritable.out, " compiled ") == 0);
  Result world = precompile(dir.path().string(), "--config kimi_k3_a8w4 --bucket 8 --world 3");
  CHECK(world.status == 1);
  CHECK_THAT(world.out, Catch::Contains("model.experts = 896 is not a multiple of world = 3"));
}

// The GPU suite's extra configs, written without a GPU, are configs precompile takes.
TEST_CASE("the GPU suite writes its config variants, and precompile lists their kernels", "[cli]") {
  test::TempDir dir;
  std::string out;
  REQUIRE(test::run_command("'" MEGAMOE_GPU_TESTS_EXE "' --write-configs '" + dir.path().string() + "/cfg'", out) == 0);
  INFO(out);
  CHECK(count(out, R"(/cfg/\w+\.json\n)") == 28);
  // Every variant written is a config the schema takes (each listed by name: a variant whose
  // patch leaves a field of its base that its activation refuses fails here, not on the GPU).
  const std::regex written(R"(/cfg/(\w+)\.json\n)");
  int listed = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), written); it != std::sregex_iterator(); ++it, ++listed) {
    const std::string name = (*it)[1];
    const std::string path = dir.path().string() + "/cfg/" + name + ".json";
    Result list = precompile(dir.path().string(), "--config '" + path + "' --all --list --path hopper");
    INFO(list.out);
    CHECK(list.status == 0);
    CHECK_THAT(list.out, Catch::Contains("config " + name));
  }
  CHECK(listed == 28);
  Result silu = precompile(dir.path().string(), "--config '" + dir.path().string() + "/cfg/kimi_silu.json' --all --list");
  CHECK_THAT(silu.out, Catch::Contains("megamoe_stage1_hopper_silu_bm160"));
  Result checked =
      precompile(dir.path().string(), "--config '" + dir.path().string() + "/cfg/kimi_checked.json' --all --list");
  CHECK_THAT(checked.out, Catch::Contains("_bc1"));
  // 64-token tiles at one block per SM: Stage1's main loop takes its 3 chunks in pairs.
  Result odd = precompile(dir.path().string(),
                          "--config '" + dir.path().string() + "/cfg/small_odd_chunks.json' --bucket 64 --list");
  CHECK_THAT(odd.out, Catch::Contains("megamoe_stage1_hopper_silu_bm64_bw128_s"));
  CHECK_THAT(odd.out, Catch::Contains("_b1_x128_bc0"));  // model_dim 384: x per chunk
  Result partial = precompile(dir.path().string(),
                              "--config '" + dir.path().string() + "/cfg/small_x256_partial.json' --bucket 1 --list");
  CHECK_THAT(partial.out, Catch::Contains("megamoe_dispatch_rows_fp8x256f_bc0"));
  // 256 weight rows a block: its kernels' names say so, and its 128-row twin's say 128.
  Result wide = precompile(dir.path().string(), "--config '" + dir.path().string() + "/cfg/kimi_w256.json' --bucket 512 --list");
  CHECK_THAT(wide.out, Catch::Contains("megamoe_stage1_hopper_situv2_bm96_bw256_s") &&
                           Catch::Contains("megamoe_stage2_hopper_bm96_bw256_s"));
  Result narrow =
      precompile(dir.path().string(), "--config '" + dir.path().string() + "/cfg/kimi_w256_as_w128.json' --bucket 512 --list");
  CHECK_THAT(narrow.out, Catch::Contains("megamoe_stage1_hopper_situv2_bm96_bw128_s"));
}

TEST_CASE("precompile compiles every card's table unless --bucket-table names one", "[cli][tables]") {
  test::TempDir dir;
  // Kimi-K3's config with its table as the H200's and an H100 table whose 1024 bucket reads MXFP4
  // with 128-token Stage1 tiles.
  nlohmann::json j = nlohmann::json::parse(test::read_text(std::string(MEGAMOE_SOURCE_DIR) + "/configs/kimi_k3_a8w4.json"));
  j["card"] = "NVIDIA H200";
  j["card_tables"]["NVIDIA H100 80GB HBM3"] = {
      {"bucket_defaults", j["bucket_defaults"]},
      {"buckets", {{"1024", {{"stage1", {{"token_tile", 128}}}, {"weights", "mxfp4"}}}}}};
  const std::string file = (dir.path() / "two_cards.json").string();
  j["name"] = "two_cards";
  test::write_text(file, j.dump(2));
  const std::string h100_kernel = "megamoe_stage1_hopper_situv2_bm128_bw128_";
  Result every = precompile(dir.path().string(), "--config " + file + " --bucket 1024 --list");
  REQUIRE(every.status == 0);
  CHECK_THAT(every.out, Catch::Contains("of 2 table(s) (NVIDIA H200; NVIDIA H100 80GB HBM3)"));
  CHECK_THAT(every.out, Catch::Contains(h100_kernel) && Catch::Contains("megamoe_stage1_hopper_situv2_bm176_bw128_"));
  const std::string args = "--config " + file + " --bucket 1024 --list --bucket-table ";
  Result h200 = precompile(dir.path().string(), args + "'NVIDIA H200'");
  REQUIRE(h200.status == 0);
  CHECK_THAT(h200.out, Catch::Contains("of 1 table(s) (NVIDIA H200)"));
  CHECK_THAT(h200.out, !Catch::Contains(h100_kernel));
  Result unknown = precompile(dir.path().string(), args + "'NVIDIA A100'");
  CHECK(unknown.status == 1);
  CHECK_THAT(unknown.out, Catch::Contains("no bucket table for 'NVIDIA A100'") &&
                              Catch::Contains("NVIDIA H200 (the default); NVIDIA H100 80GB HBM3"));
}
