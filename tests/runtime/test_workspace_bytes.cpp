// Runtime::workspace_bytes states a rank's workspace before creation (no GPU): checked against
// the sizes docs/layer.md ("Workspace") and docs/ep.md ("The symmetric region") give, written out
// here from those tables; and it refuses what creation refuses, naming the option.
#include <catch2/catch.hpp>

#include <cstdint>

#include "megamoe/megamoe.hpp"

using namespace megamoe;

namespace {

constexpr std::uint64_t kRowsOverhang = 256;  // docs/layer.md: the Hopper path's routed layout holds R + 256 rows

std::uint64_t aligned(std::uint64_t bytes) { return (bytes + 255) / 256 * 256; }

RuntimeOptions options(int world, int max_tokens, KernelPath path, long long capacity = 0) {
  RuntimeOptions o;
  o.world = world, o.max_tokens = max_tokens, o.path = path, o.routed_rows_capacity = capacity;
  return o;
}

}  // namespace

TEST_CASE("workspace_bytes of one GPU is the layer's table of buffers (docs/layer.md)", "[runtime][workspace]") {
  // Kimi-K3 at T = 8192 on the Hopper path: R = T x topk routed rows, x and h routed.
  const std::uint64_t T = 8192, K = 16, E = 896, D = 3584, I = 3072, R = T * K;
  const std::uint64_t route_counts = std::min<std::uint64_t>(256, (R + 2047) / 2048) * E * 4;
  const std::uint64_t offsets = 3 * (E + 1) * 4, rows = 4 * R * 4;
  const std::uint64_t x = (R + kRowsOverhang) * D + (R + kRowsOverhang) * D / 8;
  const std::uint64_t h = (R + kRowsOverhang) * I + (R + kRowsOverhang) * I / 8;
  const std::uint64_t wire = R * D * 2 + R * D / 32, errors = 32;
  const WorkspaceBytes b = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), options(1, 8192, KernelPath::hopper));
  CHECK(b.layer == route_counts + offsets + rows + x + h + wire + errors);
  CHECK(b.symmetric_region == 0);
  CHECK(b.group_plan == 0);
  CHECK(b.routed_rows == (long long)R);
  CHECK(b.total() == b.layer);

  // The portable path keeps x by token (blocks of 32: D / 8 covers the scales) and h by routed row.
  const WorkspaceBytes p = Runtime::workspace_bytes(load_config("kimi_k3_a8w4"), options(1, 8192, KernelPath::portable));
  CHECK(p.layer == route_counts + offsets + rows + (T * D + T * D / 8) + (R * I + R * I / 8) + wire + errors);
}

TEST_CASE("workspace_bytes over several ranks: the symmetric region and the capacity (docs/ep.md)",
          "[runtime][workspace][ep]") {
  // Kimi-K3 EP8, max_tokens 8192 a rank, Hopper path, x one scale per row (its table's x_scale).
  const std::uint64_t W = 8, T = 8192, K = 16, E = 112, D = 3584, I = 3072;
  const std::uint64_t meta = 16 + 8 * ((K + 1) / 2 * 2);  // per received token: indices, weights, home rows
  const std::uint64_t region = aligned(2 * W * (E + 1) * 4) + aligned(2 * W * 4) + aligned(W * 4) + aligned(W * 4) +
                               aligned(W * T * D) + aligned(W * T * 1) + aligned(W * T * meta) +
                               aligned(T * K * D * 2) + aligned(T * K * D / 32);
  const std::uint64_t plan = 9 * 4 + T * W * 4 + T * K * 4 + 3 * E * W * 4 + 256 * (W * E + W) * 4;
  auto layer = [&](std::uint64_t R) {
    return 4 + 3 * (E + 1) * 4 + 3 * R * 4 + 4 + (R + kRowsOverhang) * (D + D / 8) + (R + kRowsOverhang) * (I + I / 8) +
           16 + 16 + 32;
  };
  const Config kimi = load_config("kimi_k3_a8w4");
  const WorkspaceBytes worst = Runtime::workspace_bytes(kimi, options(8, 8192, KernelPath::hopper));
  CHECK(worst.routed_rows == (long long)(W * T * K));
  CHECK(worst.symmetric_region == region);
  CHECK(worst.group_plan == plan);
  CHECK(worst.layer == layer(W * T * K));
  CHECK(worst.total() == region + plan + layer(W * T * K));

  // Twice the uniform load: the routed rows shrink, the symmetric region does not.
  const WorkspaceBytes twice = Runtime::workspace_bytes(kimi, options(8, 8192, KernelPath::hopper, 2 * 8192 * 16));
  CHECK(twice.routed_rows == 2 * 8192 * 16);
  CHECK(twice.symmetric_region == region);
  CHECK(twice.layer == layer(2 * T * K));
  // docs/ep.md: 7.3 GiB of routed rows at the worst case, 1.8 GiB at twice the uniform load.
  CHECK(double(worst.total()) / double(1ull << 30) == Approx(8.5).margin(0.1));
  CHECK(double(twice.total()) / double(1ull << 30) == Approx(3.0).margin(0.1));

  // A capacity past the worst case holds the worst case.
  CHECK(Runtime::workspace_bytes(kimi, options(8, 8192, KernelPath::hopper, 1LL << 29)).total() == worst.total());
}

TEST_CASE("workspace_bytes with shared experts: the kernels' slots, and the call's widened routes (docs/layer.md)",
          "[runtime][workspace][shared]") {
  // Kimi-K3 + 1 shared expert, one GPU, T = 1024: every token 17 rows, 897 slots, and the widened
  // ids and weights (4 bytes each a slot).
  const std::uint64_t T = 1024, K = 17, E = 897, D = 3584, I = 3072, R = T * K;
  const std::uint64_t route_counts = std::min<std::uint64_t>(256, (R + 2047) / 2048) * E * 4;
  const std::uint64_t offsets = 3 * (E + 1) * 4, rows = 4 * R * 4;
  const std::uint64_t x = (R + kRowsOverhang) * D + (R + kRowsOverhang) * D / 8;
  const std::uint64_t h = (R + kRowsOverhang) * I + (R + kRowsOverhang) * I / 8;
  const std::uint64_t wire = R * D * 2 + R * D / 32, errors = 32, wide = 2 * T * K * 4;
  const Config shared = with_shared_experts(load_config("kimi_k3_a8w4"), 1);
  const WorkspaceBytes b = Runtime::workspace_bytes(shared, options(1, 1024, KernelPath::hopper));
  CHECK(b.routed_rows == (long long)R);
  CHECK(b.layer == route_counts + offsets + rows + x + h + wire + errors + wide);

  // Over 8 ranks: 113 slots a rank; the worst case is every rank's 16 routed rows a token and the
  // rank's own tokens once more.
  const WorkspaceBytes ep = Runtime::workspace_bytes(shared, options(8, 1024, KernelPath::hopper));
  CHECK(ep.routed_rows == 8LL * 1024 * 16 + 1024);
}

TEST_CASE("workspace_bytes resolves auto for a named arch, as creation does", "[runtime][workspace]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  CHECK_THROWS_WITH(Runtime::workspace_bytes(kimi, options(1, 1024, KernelPath::automatic)),
                    Catch::Contains("RuntimeOptions.path = auto and no arch"));
  CHECK(Runtime::workspace_bytes(kimi, options(1, 1024, KernelPath::automatic), "sm_90a").total() ==
        Runtime::workspace_bytes(kimi, options(1, 1024, KernelPath::hopper)).total());
  CHECK(Runtime::workspace_bytes(kimi, options(1, 1024, KernelPath::automatic), "sm_89").total() ==
        Runtime::workspace_bytes(kimi, options(1, 1024, KernelPath::tensor_core)).total());
}

TEST_CASE("workspace_bytes refuses the options creation refuses, naming them", "[runtime][workspace]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  CHECK_THROWS_WITH(Runtime::workspace_bytes(kimi, options(1, 0, KernelPath::hopper)),
                    Catch::Contains("RuntimeOptions.max_tokens = 0"));
  CHECK_THROWS_WITH(Runtime::workspace_bytes(kimi, options(3, 64, KernelPath::hopper)), Catch::Contains("896"));
  CHECK_THROWS_WITH(Runtime::workspace_bytes(kimi, options(64, 64, KernelPath::hopper)),
                    Catch::Contains("RuntimeOptions.world = 64"));
  CHECK_THROWS_WITH(Runtime::workspace_bytes(kimi, options(8, 64, KernelPath::hopper, -1)),
                    Catch::Contains("routed_rows_capacity = -1"));
}
