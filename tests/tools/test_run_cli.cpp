// megamoe-run on the command line: help, usage errors, and the plain "no GPU" exit.
#include <catch2/catch.hpp>

#include "megamoe/device.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
int run(const std::string& args, std::string& out) {
  return test::run_command("'" MEGAMOE_RUN_EXE "' " + args, out);
}
}  // namespace

TEST_CASE("megamoe-run --help and usage errors", "[cli]") {
  std::string out;
  CHECK(run("--help", out) == 0);
  CHECK_THAT(out, Catch::Contains("Usage: megamoe-run [OPTIONS]") && Catch::Contains("--node-size N") &&
                      !Catch::Contains("--ipc-rank"));
  CHECK(run("", out) == 2);
  CHECK_THAT(out, Catch::Contains("megamoe-run: --config is required"));
  CHECK(run("--config kimi_k3_a8w4 --bs 1,x", out) == 2);
  CHECK_THAT(out, Catch::Contains("--bs: expects integers of at least 0, got 'x'"));
  CHECK(run("--config kimi_k3_a8w4 --path fast", out) == 2);
  CHECK(run("--config kimi_k3_a8w4 --inputs spiky", out) == 2);
  CHECK_THAT(out, Catch::Contains("--inputs: expects normal, outliers or massive, got 'spiky'"));
  CHECK(run("--config kimi_k3_a8w4 --wat", out) == 2);
  CHECK(run("--config kimi_k3_a8w4 --world 2 --devices 0,0", out) == 2);
  CHECK_THAT(out, Catch::Contains("--devices is for --transport peer, ipc or nvshmem"));
  CHECK(run("--config kimi_k3_a8w4 --world 2 --transport ipc --devices 0", out) == 2);
  CHECK_THAT(out, Catch::Contains("--devices has 1 entries, expected --world = 2"));
  CHECK(run("--config kimi_k3_a8w4 --world 2 --node-size 1", out) == 2);
  CHECK_THAT(out, Catch::Contains("--node-size is for --transport nvshmem"));
  CHECK(run("--config kimi_k3_a8w4 --world 4 --transport nvshmem --node-size 3", out) == 2);
  CHECK_THAT(out, Catch::Contains("--node-size expects 0 or a divisor of --world = 4, got 3"));
  CHECK(run("--config kimi_k3_a8w4 --world 2 --transport shmem", out) == 2);
  CHECK_THAT(out, Catch::Contains("--transport: expects loopback, peer, ipc or nvshmem, got 'shmem'"));
  CHECK(run("--config kimi_k3_a8w4 --world 33", out) == 2);
  CHECK_THAT(out, Catch::Contains("--world: expects 1..32, got '33'"));
  CHECK(run("--config kimi_k3_a8w4 --experts-per-rank -1", out) == 2);
  // A world that does not divide the experts: named before any GPU is opened.
  CHECK(run("--config kimi_k3_a8w4 --world 3", out) == 1);
  CHECK_THAT(out, Catch::Contains("model.experts = 896 is not a multiple of world = 3"));
  CHECK(run("--config kimi_k3_a8w4 --world 8 --redundant-experts 60", out) == 1);  // refused before a GPU is opened
  CHECK_THAT(out, Catch::Contains("RuntimeOptions.redundant_experts = 60") && Catch::Contains("64 would"));
  CHECK(run("--config kimi_k3_a8w4 --shared-experts 17", out) == 1);
  CHECK_THAT(out, Catch::Contains("shared_experts = 17"));
  CHECK(run("--config kimi_k3_a8w4 --experts-per-rank 1024 --shared-experts 1", out) == 1);  // before a GPU is opened
  CHECK_THAT(out, Catch::Contains("1024 experts a rank and 1 shared ones take 1025 slots a rank"));
  CHECK(run("--config kimi_k3_a8w4 --shared-experts -1", out) == 2);
  CHECK_THAT(out, Catch::Contains("--shared-experts: expects a count of at least 0, got '-1'"));
  CHECK(run("--config kimi_k3_a8w4 --shared-scale 2", out) == 2);
  CHECK_THAT(out, Catch::Contains("--shared-scale is for --shared-experts N with N > 0"));
  CHECK(run("--config kimi_k3_a8w4 --shared-experts 1 --shared-scale nan", out) == 2);
  CHECK_THAT(out, Catch::Contains("--shared-scale: expects a finite number, got 'nan'"));
  CHECK(run("--config kimi_k3_a8w4 --world 2 --capacity -5", out) == 2);
  CHECK_THAT(out, Catch::Contains("--capacity: expects a count of rows of at least 0, got '-5'"));
  CHECK(run("--config kimi_k3_a8w4 --experts-per-rank 0", out) == 2);
  CHECK_THAT(out, Catch::Contains("--experts-per-rank: expects a count of at least 1, got '0'"));
}

TEST_CASE("megamoe-run without a GPU says so and exits 3", "[cli]") {
  if (gpu_available(BackendKind::cuda)) {
    WARN("a GPU is present: the no-GPU exit cannot be checked on this machine");
    return;
  }
  std::string out;
  CHECK(run("--config kimi_k3_a8w4 --bs 1", out) == 3);
  CHECK_THAT(out, Catch::Contains("no GPU"));
}

TEST_CASE("megamoe-bench --help, usage errors and the no-GPU exit", "[cli]") {
  std::string out;
  auto bench = [&](const std::string& args) { return test::run_command("'" MEGAMOE_BENCH_EXE "' " + args, out); };
  CHECK(bench("--help") == 0);
  CHECK_THAT(out, Catch::Contains("Usage: megamoe-bench [OPTIONS]") && Catch::Contains("--crossover"));
  CHECK(bench("--world 33 --config kimi_k3_a8w4") == 2);
  CHECK_THAT(out, Catch::Contains("megamoe-bench: --world: expects 1..32, got '33'"));
  CHECK(bench("--world 2 --config kimi_k3_a8w4 --transport ipc") == 2);
  CHECK(bench("--world 1") == 2);
  CHECK(bench("--world 1 --config kimi_k3_a8w4 --bs 0") == 2);
  CHECK(bench("--world 2 --config kimi_k3_a8w4 --against generic_a8w4") == 2);
  CHECK_THAT(out, Catch::Contains("--against is for --world 1"));
  CHECK(bench("--world 2 --config kimi_k3_a8w4 --shared-experts 1") == 2);
  CHECK_THAT(out, Catch::Contains("--shared-experts is for --world 1"));
  CHECK(bench("--world 1 --config kimi_k3_a8w4 --shared-experts 0") == 2);
  CHECK_THAT(out, Catch::Contains("--shared-experts: expects a count of at least 1, got '0'"));
  CHECK(bench("--world 1 --config kimi_k3_a8w4 --against nosuch") == 1);  // before any GPU is opened
  CHECK_THAT(out, Catch::Contains("no config named 'nosuch'"));
  if (!gpu_available(BackendKind::cuda)) {
    CHECK(bench("--world 1 --config kimi_k3_a8w4 --bs 1") == 3);
    CHECK_THAT(out, Catch::Contains("no GPU"));
    CHECK(bench("--world 1 --config kimi_k3_a8w4 --against generic_a8w4 --bs 1") == 3);
  }
}
