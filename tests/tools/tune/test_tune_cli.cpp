// megamoe-tune on the command line: help, usage errors, the no-GPU exit, and --compile-only
// (what a run would compile, built here into a fresh cache, then found there).
#include <catch2/catch.hpp>

#include <filesystem>

#include "megamoe/device.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
int tune(const std::string& args, std::string& out) { return test::run_command("'" MEGAMOE_TUNE_EXE "' " + args, out); }
}  // namespace

TEST_CASE("megamoe-tune --help and usage errors", "[cli][tune]") {
  std::string out;
  CHECK(tune("--help", out) == 0);
  CHECK_THAT(out, Catch::Contains("Usage: megamoe-tune [OPTIONS]") && Catch::Contains("--min-gain G"));
  CHECK(tune("--out x.json", out) == 2);
  CHECK_THAT(out, Catch::Contains("megamoe-tune: --config is required"));
  CHECK(tune("--config kimi_k3_a8w4", out) == 2);
  CHECK_THAT(out, Catch::Contains("megamoe-tune: --out is required"));
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --world 33", out) == 2);
  CHECK_THAT(out, Catch::Contains("--world: expects 1..32, got '33'"));
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --world 2 --transport ipc", out) == 2);
  CHECK_THAT(out, Catch::Contains("--transport: expects loopback or peer, got 'ipc'"));
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --minutes soon", out) == 2);
  CHECK_THAT(out, Catch::Contains("--minutes: expects a number of minutes above 0, got 'soon'"));
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --min-gain 0.7", out) == 2);
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --pairs 2", out) == 2);
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --wat", out) == 2);
  // Errors found before any GPU is opened exit 1 and name the value.
  CHECK(tune("--config kimi_k3_a8w4 --out Tuned-Kimi.json", out) == 1);
  CHECK_THAT(out, Catch::Contains("--out Tuned-Kimi.json: expected NAME.json with NAME of [a-z0-9_]"));
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --modes x=col", out) == 1);
  CHECK_THAT(out, Catch::Contains("part 'x=col'"));
  CHECK(tune("--config generic_a8w4 --out x.json --modes h=static --compile-only", out) == 1);
  CHECK_THAT(out, Catch::Contains("a static h scale needs a bounded activation"));
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --buckets 3 --compile-only", out) == 1);
  CHECK_THAT(out, Catch::Contains("bucket 3: expected a power of two from 1 to 32768"));
  CHECK(tune("--config no_such_model --out x.json", out) == 1);
  CHECK(tune("--config kimi_k3_a8w4 --out x.json --world 3 --compile-only", out) == 1);
  CHECK_THAT(out, Catch::Contains("model.experts = 896 is not a multiple of world = 3"));
}

TEST_CASE("megamoe-tune without a GPU says so and exits 3", "[cli][tune]") {
  if (gpu_available(BackendKind::cuda)) {
    WARN("a GPU is present: the no-GPU exit cannot be checked on this machine");
    return;
  }
  test::TempDir dir;
  std::string out;
  CHECK(tune("--config kimi_k3_a8w4 --out '" + (dir.path() / "t.json").string() + "'", out) == 3);
  CHECK_THAT(out, Catch::Contains("no GPU"));
  CHECK(!std::filesystem::exists(dir.path() / "t.json"));
}

TEST_CASE("megamoe-tune --compile-only builds the search's kernels for sm_90a into the cache", "[cli][tune]") {
  test::TempDir dir;
  const std::string env = "MEGAMOE_CACHE_DIR='" + (dir.path() / "cache").string() + "' ";
  const std::string args = "--config '" MEGAMOE_SOURCE_DIR "/tests/python/configs/small_a8w4.json' --out '" +
                           (dir.path() / "t.json").string() +
                           "' --buckets 1 --modes x=row,h=static --no-fp8-resident --no-fp8-wire --compile-only -j 2";
  std::string out;
  REQUIRE(test::run_command(env + "'" MEGAMOE_TUNE_EXE "' " + args, out) == 0);
  INFO(out);
  // Bucket 1 (0.5 rows an expert): token tiles 16 and 32, each stage over 128 and 256 weight rows,
  // with route, dispatch and combine: every kernel compiled, none found.
  CHECK_THAT(out, Catch::Contains("compile (tiles): "));
  CHECK_THAT(out, Catch::Contains("megamoe-tune --compile-only: small_a8w4 from small_a8w4's table for sm_90a"));
  CHECK_THAT(out, Catch::Matches("[\\s\\S]*compiled ([1-9][0-9]*) kernels in[\\s\\S]*"));
  std::size_t entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path() / "cache" / "v1")) entries += e.is_directory();
  CHECK(entries >= 7);
  // Again: all found in the cache.
  REQUIRE(test::run_command(env + "'" MEGAMOE_TUNE_EXE "' " + args, out) == 0);
  CHECK_THAT(out, Catch::Contains("compiled 0 kernels in"));
  CHECK(!std::filesystem::exists(dir.path() / "t.json"));  // nothing timed, nothing written
  // With --world 2, a rank's kernels too (its route, dispatch, stages and combine differ).
  REQUIRE(test::run_command(env + "'" MEGAMOE_TUNE_EXE "' " + args + " --world 2", out) == 0);
  CHECK_THAT(out, Catch::Contains("compile (world 2): "));
  CHECK_THAT(out, Catch::Matches("[\\s\\S]*compiled ([1-9][0-9]*) kernels in[\\s\\S]*"));
}
