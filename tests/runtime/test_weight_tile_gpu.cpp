// The Hopper kernels' 256-row weight tile (a stage's "weight_tile": 256, four consumer
// warpgroups): each output element is summed over the same chunks in the same order as over 128
// rows, and h's blocks of 128 take the same maxima (a tile's own rather than a cluster pair's), so
// on the same inputs the two must give the same bits, every element of every call. The layer's
// accuracy against the CPU references with 256-row tiles is test_layer_gpu.cpp's.
#include <catch2/catch.hpp>

#include <random>

#include <fmt/format.h>

#include "common/workload.hpp"
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

// `wide` (256-row tiles where it says so) against `narrow` (the same token tiles over 128 rows) on
// the same weights and inputs: equal bits at each size.
void same_bits(const std::string& wide, const std::string& narrow, const std::vector<Size>& sizes) {
  test::TempDir dir;
  RuntimeOptions o;
  o.max_tokens = 1;
  for (const Size& s : sizes) o.max_tokens = std::max(o.max_tokens, int(s.tokens));
  auto a_rt = Runtime::create(test::write_config_variant(dir.path(), wide), o);
  auto b_rt = Runtime::create(test::write_config_variant(dir.path(), narrow), o);
  if (a_rt->path() != KernelPath::hopper) {
    WARN("SKIPPED: the 256-row tiles are the Hopper kernels'; this GPU runs the " << to_string(a_rt->path()) << " path");
    return;
  }
  const ModelShape& m = a_rt->config().model;
  int wide_buckets = 0;
  for (const BucketConfig& b : a_rt->config().buckets) wide_buckets += b.stage1.weight_tile == 256;
  REQUIRE(wide_buckets > 0);
  for (const BucketConfig& b : b_rt->config().buckets) REQUIRE(b.stage1.weight_tile == 128);
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
    const BucketConfig& bucket = a_rt->config().bucket_for_tokens(tokens);
    fmt::print("  {}: {} tokens, {} (bucket {}, weight tiles {} and {}): {} of {} outputs differ from {}'s\n", wide,
               tokens, route, bucket.bucket, bucket.stage1.weight_tile, bucket.stage2.weight_tile, d.differ, a.size(),
               narrow);
    INFO(wide << ", " << tokens << " tokens, " << route);
    CHECK(d.nan == 0);
    CHECK(d.differ == 0);
  }
}

}  // namespace

TEST_CASE("256-row weight tiles give the 128-row kernels' bits: Kimi-K3 at every tile width", "[gpu][w256]") {
  // Buckets of each token tile (16 to 96); experts of 1, 3, 5, ... rows (ramp): tiles at every
  // width, alone and as an expert's second tile.
  same_bits("kimi_w256", "kimi_w256_as_w128",
            {{1}, {8}, {100}, {200}, {396, "ramp"}, {784, "ramp"}, {1024}, {3000}, {8192}});
}

TEST_CASE("256-row weight tiles with h per 128 (SiLU) and odd chunk counts give the 128-row kernels' bits",
          "[gpu][w256]") {
  same_bits("small_odd_silu_w256", "small_odd_silu_w128", {{1}, {5}, {40}, {333, "ramp"}, {2000}});
}
