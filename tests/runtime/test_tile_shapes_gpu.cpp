// The Hopper kernels' tile shapes give the same bits whatever the shape: each output element is
// summed over the same chunks in the same order, and h's blocks of 128 take the same maxima.
// - The 256-row weight tile (a stage's "weight_tile": 256, four consumer warpgroups) against 128
//   rows (a tile's own maxima rather than a cluster pair's).
// - Token tiles wider than 176 where a stage sums with no promotion (Stage1 up to 256, Stage2 up
//   to 192; the fp8-resident kernels up to 224 and 176) against 160.
// On the same inputs each pair must give the same bits, every element of every call. The layer's
// accuracy against the CPU references with these tiles is test_layer_gpu.cpp's.
#include <catch2/catch.hpp>

#include <random>

#include <fmt/format.h>

#include "common/workload.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/megamoe.hpp"
#include "runtime/layer_outputs.hpp"
#include "runtime/test_config_variants.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {

struct Size {
  std::int64_t tokens;
  std::string route = "uniform";
};

// `a` against `b` (the same layer with other tiles, which `differs` finds in some bucket of a and
// b) on the same weights and inputs: equal bits at each size.
template <class Differs>
void same_bits(const std::string& a_name, const std::string& b_name, const std::vector<Size>& sizes, Differs differs) {
  test::TempDir dir;
  RuntimeOptions o;
  o.max_tokens = 1;
  for (const Size& s : sizes) o.max_tokens = std::max(o.max_tokens, int(s.tokens));
  auto a_rt = Runtime::create(test::write_config_variant(dir.path(), a_name), o);
  auto b_rt = Runtime::create(test::write_config_variant(dir.path(), b_name), o);
  if (a_rt->path() != KernelPath::hopper) {
    WARN("SKIPPED: these tile shapes are the Hopper kernels'; this GPU runs the " << to_string(a_rt->path()) << " path");
    return;
  }
  const ModelShape& m = a_rt->config().model;
  int differing = 0;
  for (int i = 0; i < kBucketCount; ++i) differing += differs(a_rt->config().buckets[i], b_rt->config().buckets[i]);
  REQUIRE(differing > 0);
  const Mxfp4ExpertWeights w = workload::random_weights(m, 19);
  auto w_a = a_rt->prepare_weights(w);
  auto w_b = b_rt->prepare_weights(w);
  std::mt19937_64 rng(31);
  for (const auto& [tokens, route] : sizes) {
    const workload::Routing r = workload::make_routing(route, tokens, m.topk, m.experts_per_rank, rng);
    const std::vector<std::uint16_t> x = workload::random_bf16(tokens, m.model_dim, rng);
    const std::vector<std::uint16_t> a = test::layer_outputs(*a_rt, *w_a, r, x, tokens);
    const std::vector<std::uint16_t> b = test::layer_outputs(*b_rt, *w_b, r, x, tokens);
    const test::BitsDiff d = test::diff_bits(a, b);
    const BucketConfig& ba = a_rt->config().bucket_for_tokens(tokens);
    const BucketConfig& bb = b_rt->config().bucket_for_tokens(tokens);
    fmt::print("  {}: {} tokens, {} (bucket {}, tiles {}x{} and {}x{} against {}x{} and {}x{}): {} of {} outputs differ "
               "from {}'s\n",
               a_name, tokens, route, ba.bucket, ba.stage1.token_tile, ba.stage1.weight_tile, ba.stage2.token_tile,
               ba.stage2.weight_tile, bb.stage1.token_tile, bb.stage1.weight_tile, bb.stage2.token_tile,
               bb.stage2.weight_tile, d.differ, a.size(), b_name);
    INFO(a_name << ", " << tokens << " tokens, " << route);
    CHECK(d.nan == 0);
    CHECK(d.differ == 0);
  }
}

bool weight_tiles_differ(const BucketConfig& a, const BucketConfig& b) {
  return a.stage1.weight_tile == 256 && b.stage1.weight_tile == 128;
}
bool token_tiles_differ(const BucketConfig& a, const BucketConfig& b) {
  return a.stage1.token_tile > kHopperMaxBmPromoted && a.stage1.token_tile != b.stage1.token_tile;
}

}  // namespace

TEST_CASE("256-row weight tiles give the 128-row kernels' bits: Kimi-K3 at every tile width", "[gpu][w256]") {
  // Buckets of each token tile (16 to 96); experts of 1, 3, 5, ... rows (ramp): tiles at every
  // width, alone and as an expert's second tile.
  same_bits("kimi_w256", "kimi_w256_as_w128", {{1}, {8}, {100}, {200}, {396, "ramp"}, {784, "ramp"}, {1024}, {3000}, {8192}},
            weight_tiles_differ);
}

TEST_CASE("256-row weight tiles with h per 128 (SiLU) and odd chunk counts give the 128-row kernels' bits",
          "[gpu][w256]") {
  same_bits("small_odd_silu_w256", "small_odd_silu_w128", {{1}, {5}, {40}, {333, "ramp"}, {2000}}, weight_tiles_differ);
}

TEST_CASE("token tiles past 176 with no promotion give the 160-token tiles' bits: Kimi-K3, both weight sources",
          "[gpu][wide]") {
  // Ramp routings from 1024 tokens give experts of 1, 3, 5, ... rows: every width up to the tile,
  // alone and as an expert's second or third tile.
  const std::vector<Size> sizes = {{1024}, {1400, "ramp"}, {2048}, {4096}, {3000, "ramp"}, {8192}};
  same_bits("kimi_wide_tiles", "kimi_wide_as_160", sizes, token_tiles_differ);
  same_bits("kimi_wide_tiles_fp8res", "kimi_wide_as_160", sizes, token_tiles_differ);
}
