// megamoe-workspace on the command line, without a GPU: help, usage errors, one config's
// workspace as Runtime::workspace_bytes states it, and the capacity table of the built-in models.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "megamoe/megamoe.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
int workspace(const std::string& args, std::string& out) {
  return test::run_command("'" MEGAMOE_WORKSPACE_EXE "' " + args, out);
}
}  // namespace

TEST_CASE("megamoe-workspace --help and usage errors", "[cli][workspace]") {
  std::string out;
  CHECK(workspace("--help", out) == 0);
  CHECK_THAT(out, Catch::Contains("Usage: megamoe-workspace [OPTIONS]"));
  CHECK_THAT(out, Catch::Contains("--config NAME") && Catch::Contains("--node-size N") && Catch::Contains("Exit status"));
  CHECK(workspace("", out) == 2);
  CHECK_THAT(out, Catch::Contains("give --config NAME or --table"));
  CHECK(workspace("--config kimi_k3_a8w4 --table", out) == 2);
  CHECK_THAT(out, Catch::Contains("--config excludes --table"));
  CHECK(workspace("--config kimi_k3_a8w4 --world x", out) == 2);
  CHECK_THAT(out, Catch::Contains("megamoe-workspace: --world: expects 1..32, got 'x'"));
  CHECK(workspace("--config kimi_k3_a8w4 --path fast", out) == 2);
  CHECK_THAT(out, Catch::Contains("--path: expects auto, portable, tensor_core or hopper, got 'fast'"));
  CHECK(workspace("--config kimi_k3_a8w4 --layers 0", out) == 2);
  CHECK_THAT(out, Catch::Contains("--layers: expects a count of at least 1, got '0'"));
  CHECK(workspace("--config kimi_k3_a8w4 --world 2 --world 8 --bogus", out) == 2);
  CHECK(workspace("--config kimi_k3_a8w4 --world 2 --world 8", out) == 0);  // a flag given twice: the last
  CHECK_THAT(out, Catch::Contains("world 8"));
  CHECK(workspace("--config kimi_k3_a8w4 --bogus", out) == 2);
  CHECK_THAT(out, Catch::Contains("--bogus"));
  CHECK(workspace("--config kimi_k3_a8w4 --world 3", out) == 1);
  CHECK_THAT(out, Catch::Contains("model.experts = 896 is not a multiple of world = 3"));
}

TEST_CASE("megamoe-workspace prints what Runtime::workspace_bytes states, with no GPU", "[cli][workspace]") {
  std::string out;
  REQUIRE(workspace("--config kimi_k3_a8w4 --world 8 --max-tokens 4096 --capacity 131072 --path hopper", out) == 0);
  RuntimeOptions o;
  o.world = 8, o.max_tokens = 4096, o.routed_rows_capacity = 131072, o.path = KernelPath::hopper;
  const WorkspaceBytes b = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), o);
  CHECK_THAT(out, Catch::Contains("131072 routed rows a rank"));
  CHECK_THAT(out, Catch::Contains(fmt::format("layer            {:>15} bytes", b.layer)));
  CHECK_THAT(out, Catch::Contains(fmt::format("symmetric region {:>15} bytes", b.symmetric_region)));
  CHECK_THAT(out, Catch::Contains(fmt::format("total            {:>15} bytes", b.total())));

  REQUIRE(workspace("--config kimi_k3_a8w4 --world 8 --max-tokens 4096 --path hopper --shared-experts 1", out) == 0);
  o.routed_rows_capacity = 0;
  const WorkspaceBytes s = Runtime::workspace_bytes(with_shared_experts(load_config("kimi_k3_a8w4"), 1), o);
  CHECK_THAT(out, Catch::Contains(fmt::format("{} routed rows a rank", 8 * 4096 * 16 + 4096)));
  CHECK_THAT(out, Catch::Contains(fmt::format("total            {:>15} bytes", s.total())));
  CHECK(workspace("--config kimi_k3_a8w4 --shared-experts 17", out) == 1);
  CHECK_THAT(out, Catch::Contains("shared_experts = 17"));

  REQUIRE(workspace("--table --max-tokens 8192", out) == 0);
  o.max_tokens = 8192, o.routed_rows_capacity = 0, o.path = KernelPath::automatic;
  const WorkspaceBytes worst = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), o, "sm_90a");
  o.routed_rows_capacity = 2 * 8192 * 16;
  const WorkspaceBytes twice = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), o, "sm_90a");
  CHECK_THAT(out, Catch::Contains(fmt::format("| kimi_k3_a8w4 | 8 | 1048576 | {:.2f} | 262144 | {:.2f} |",
                                              double(worst.total()) / double(1ull << 30),
                                              double(twice.total()) / double(1ull << 30))));
  for (const std::string& name : builtin_config_names()) CHECK_THAT(out, Catch::Contains("| " + name + " | 1 |"));
}

TEST_CASE("megamoe-workspace --layers L: the workspace once and L layers' weights", "[cli][workspace]") {
  std::string out;
  REQUIRE(workspace("--config qwen3_235b_a8w4 --world 8 --max-tokens 8192 --path hopper --layers 94", out) == 0);
  RuntimeOptions o;
  o.world = 8, o.max_tokens = 8192, o.path = KernelPath::hopper;
  const WorkspaceBytes b = Runtime::workspace_bytes(load_config("qwen3_235b_a8w4"), o);
  const std::size_t w = Runtime::weights_bytes(load_config("qwen3_235b_a8w4"), o);
  // Qwen3-235B: 16 experts a rank of 4096 x 1536, MXFP4 (17/32 of a byte a value) and at least that again.
  CHECK(w >= std::size_t(16) * 3 * 4096 * 1536 * 17 / 32);
  CHECK_THAT(out, Catch::Contains(fmt::format("weights of one layer on the rank {:>15} bytes", w)));
  CHECK_THAT(out, Catch::Contains(fmt::format("94 layer(s) through one runtime   {:>15} bytes", b.total() + 94 * w)));
}

TEST_CASE("megamoe-workspace --transport nvshmem over nodes adds the relay, the staging areas and the outbox",
          "[cli][workspace]") {
  std::string ipc, one_node, shmem;
  const std::string args = "--config kimi_k3_a8w4 --world 8 --max-tokens 1024 --capacity 32768 --path hopper";
  REQUIRE(workspace(args, ipc) == 0);
  REQUIRE(workspace(args + " --transport nvshmem", one_node) == 0);
  REQUIRE(workspace(args + " --transport nvshmem --node-size 4", shmem) == 0);
  RuntimeOptions o;
  o.world = 8, o.max_tokens = 1024, o.routed_rows_capacity = 32768, o.path = KernelPath::hopper;
  const WorkspaceBytes plain = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), o);
  o.transport = Transport::nvshmem, o.node_size = 4;
  const WorkspaceBytes staged = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), o);
  // docs/ep.md, "What it costs beside ipc", each area 256-byte aligned: W = 8 ranks in 2 nodes,
  // T = 1024, K = 16, D = 3584, one x scale a row (Kimi-K3's table), R = 32768 outbox rows,
  // relay rows of 144 + 16 + 4 x 4 bytes (176).
  const std::uint64_t W = 8, T = 1024, K = 16, D = 3584, E = 112, R = 32768, relay = 176, nodes = 2;
  auto aligned = [](std::uint64_t b) { return (b + 255) / 256 * 256; };
  const std::uint64_t added = aligned(W * W * 4) + aligned(W * 4) + aligned(W * T * relay) + aligned(W * T * K * 8) +
                              aligned(nodes * T * D * 2) + aligned(W * (E + 1) * 4) + aligned(T * D) + aligned(T * 1) +
                              aligned(nodes * T * relay) + aligned(R * D * 2) + aligned(R * D / 32) +
                              aligned(1024 * D * 2);
  CHECK(staged.symmetric_region == plain.symmetric_region + added);
  CHECK(staged.group_plan == plain.group_plan + W * T * 4 + W * 4);  // the gateway rows, the forwarding counts
  CHECK_THAT(shmem, Catch::Contains(fmt::format("symmetric region {:>15} bytes", staged.symmetric_region)));
  CHECK_THAT(ipc, Catch::Contains(fmt::format("symmetric region {:>15} bytes", plain.symmetric_region)));
  CHECK(one_node == ipc);  // one node: load and store, nothing more
  std::string out;
  CHECK(workspace(args + " --transport nvshmem --node-size 3", out) == 2);
  CHECK_THAT(out, Catch::Contains("--node-size expects 0 or a divisor of --world = 8, got 3"));
}
