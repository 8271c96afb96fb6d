// The fp8-resident kernels (a bucket's "weights": "fp8_resident"): they read an e4m3 copy of the
// values the mxfp4 kernels convert in registers and split K as those do, so on the same inputs
// they must give the mxfp4 kernels' bits, every element of every call; and the copy is made only
// where a bucket reads it, refused with RuntimeOptions::fp8_resident_weights, and required by
// forward(). The layer's accuracy against the CPU references at these buckets is
// test_layer_gpu.cpp's ("Kimi-K3 shape, fp8-resident weights").
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

// `config` (every bucket fp8_resident) against the same config with the copy refused (every
// bucket mxfp4), on the same weights and inputs: equal bits at each size.
void same_bits(const std::string& config, const std::vector<Size>& sizes) {
  test::TempDir dir;
  const std::string path = test::write_config_variant(dir.path(), config);
  RuntimeOptions o;
  o.max_tokens = 1;
  for (const Size& s : sizes) o.max_tokens = std::max(o.max_tokens, int(s.tokens));
  auto resident = Runtime::create(path, o);
  o.fp8_resident_weights = false;
  auto mxfp4 = Runtime::create(path, o);
  if (resident->path() != KernelPath::hopper) {
    WARN("SKIPPED: the fp8-resident kernels are Hopper kernels; this GPU runs the " << to_string(resident->path())
                                                                                   << " path");
    return;
  }
  const ModelShape& m = resident->config().model;
  for (const BucketConfig& b : mxfp4->config().buckets) REQUIRE(b.weights == WeightSource::mxfp4);
  const Mxfp4ExpertWeights w = workload::random_weights(m, 17);
  auto w_resident = resident->prepare_weights(w);
  auto w_mxfp4 = mxfp4->prepare_weights(w);
  // The copy: rows x K bytes of e4m3 per expert and matrix, and none where no bucket reads it.
  CHECK(w_resident->resident_bytes ==
        std::size_t(m.experts_per_rank) * (2ull * m.inter_dim * m.model_dim + 1ull * m.model_dim * m.inter_dim));
  CHECK(w_mxfp4->resident_bytes == 0);
  CHECK(w_mxfp4->w1_resident.get() == nullptr);
  std::mt19937_64 rng(29);
  for (const auto& [tokens, route] : sizes) {
    const workload::Routing r = workload::make_routing(route, tokens, m.topk, m.experts_per_rank, rng);
    const std::vector<std::uint16_t> x = workload::random_bf16(tokens, m.model_dim, rng);
    const std::vector<std::uint16_t> a = test::layer_outputs(*resident, *w_resident, r, x, tokens);
    const std::vector<std::uint16_t> b = test::layer_outputs(*mxfp4, *w_mxfp4, r, x, tokens);
    const test::BitsDiff d = test::diff_bits(a, b);
    fmt::print("  {}: {} tokens, {} (bucket {}): {} of {} outputs differ from the mxfp4 kernels'\n", config, tokens,
               route, resident->config().bucket_for_tokens(tokens).bucket, d.differ, a.size());
    INFO(config << ", " << tokens << " tokens, " << route);
    CHECK(d.nan == 0);
    CHECK(d.differ == 0);
  }
}

}  // namespace

TEST_CASE("fp8-resident weights give the mxfp4 kernels' bits: Kimi-K3 at every tile width", "[gpu][fp8res]") {
  // Sizes in buckets of each token tile (16 to 176); experts of 1, 3, 5, ... rows (ramp): tiles at
  // every width, alone and as an expert's second tile.
  same_bits("kimi_fp8res", {{1}, {8}, {100}, {300}, {784, "ramp"}, {396, "ramp"}, {1024}, {1500}, {3000}, {8192}});
}

TEST_CASE("fp8-resident weights give the mxfp4 kernels' bits: x per 128 with odd chunk counts, x per 256 over six",
          "[gpu][fp8res]") {
  same_bits("small_odd_fp8res", {{1}, {5}, {40}, {333}, {2000}});
  same_bits("small_x256_fp8res", {{1}, {7}, {90}, {1100}});
}

TEST_CASE("with no promotion (x per row, h static) too, fp8-resident weights give the mxfp4 kernels' bits",
          "[gpu][fp8res][scales]") {
  same_bits("kimi_fp8res_x_row_h_static", {{1}, {100}, {784, "ramp"}, {1500}, {8192}});
  same_bits("small_odd_fp8res_x_row_h_static", {{1}, {40}, {333}, {2000}});
}

TEST_CASE("weights without the fp8-resident copy are refused by a runtime whose bucket reads it, naming the option",
          "[gpu][fp8res]") {
  test::TempDir dir;
  const std::string path = test::write_config_variant(dir.path(), "small_x256_fp8res");
  RuntimeOptions o;
  o.max_tokens = 64;
  auto resident = Runtime::create(path, o);
  if (resident->path() != KernelPath::hopper) {
    WARN("SKIPPED: the fp8-resident kernels are Hopper kernels; this GPU runs the " << to_string(resident->path())
                                                                                   << " path");
    return;
  }
  o.fp8_resident_weights = false;
  auto mxfp4 = Runtime::create(path, o);
  const ModelShape& m = resident->config().model;
  auto w = mxfp4->prepare_weights(workload::random_weights(m, 3));
  std::mt19937_64 rng(1);
  const workload::Routing r = workload::make_routing("uniform", 4, m.topk, m.experts_per_rank, rng);
  const std::vector<std::uint16_t> x = workload::random_bf16(4, m.model_dim, rng);
  CHECK_THROWS_WITH(test::layer_outputs(*resident, *w, r, x, 4),
                    Catch::Contains("fp8-resident") && Catch::Contains("fp8_resident_weights"));
  // The same weights serve the runtime that refused the copy.
  CHECK(test::layer_outputs(*mxfp4, *w, r, x, 4).size() == x.size());
}
