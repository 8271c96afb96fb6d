// megamoe-tune's tactic space: the tiles worth timing, the shape contract's pruning, the modes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "config/bucket_check.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/errors.hpp"
#include "tune/tactic_space.hpp"
#include "config/config_json.hpp"
#include "tune/tactic_labels.hpp"

using namespace megamoe;
using namespace megamoe::tune;

namespace {
bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

TEST_CASE("token tiles: contiguous multiples of 16 up past the busiest expert, reaching the shipped Kimi-K3 tiles",
          "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  for (int bucket = 1; bucket <= 8192; bucket *= 2) {
    INFO("bucket " << bucket);
    const std::vector<int> tiles = token_tiles(kimi, bucket);
    REQUIRE(!tiles.empty());
    CHECK(tiles.size() <= 8);
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      CHECK(tiles[i] % 16 == 0);
      CHECK(tiles[i] >= 16);
      CHECK(tiles[i] <= 256);
      if (i) CHECK(tiles[i] == tiles[i - 1] + 16);
    }
    // The widest covers the busiest expert in one tile wherever a tile can (256 at most).
    const double busiest = busiest_rows_per_expert(kimi, bucket);
    CHECK((tiles.back() >= busiest || tiles.back() == 256));
    // Kimi-K3's hand-tuned table is inside the space the search walks.
    const BucketConfig& shipped = kimi.bucket(bucket);
    CHECK(contains(tiles, shipped.stage1.token_tile));
    CHECK(contains(tiles, shipped.stage2.token_tile));
  }
  // Rows per expert at Kimi-K3's keys (112 experts a rank, top-16): 512 tokens give 73.1.
  CHECK(mean_rows_per_expert(kimi, 512) == Approx(512.0 * 16 / 112));
  CHECK(busiest_rows_per_expert(kimi, 512) == Approx(512.0 * 16 / 112 + 3 * std::sqrt(512.0 * 16 / 112 * (1 - 16.0 / 112))));
  CHECK(busiest_rows_per_expert(kimi, 1) <= 1.0);  // never more rows than tokens
}

TEST_CASE("candidates differ from the incumbent in their knob alone and pass the contract; the rest are pruned with "
          "its reason",
          "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  SpaceOptions space;
  for (int bucket : {1, 64, 512, 1024, 4096, 8192}) {
    for (XScale x : {XScale::per_block, XScale::per_row}) {
      const BucketConfig inc = with_modes(kimi, kimi.bucket(bucket), {x, HScale::static_bound, CombineWire::bf16});
      REQUIRE(allowed(kimi, inc));
      for (Knob k : {Knob::stage1, Knob::stage2, Knob::weights}) {
        INFO("bucket " << bucket << " x " << to_string(x) << " knob " << to_string(k));
        std::vector<Pruned> pruned;
        const std::vector<BucketConfig> list = candidates(kimi, inc, k, space, &pruned);
        for (const BucketConfig& c : list) {
          CHECK_NOTHROW(check_bucket(kimi, c, "$", "test"));
          CHECK(entry_text(c) != entry_text(inc));
          CHECK(c.x_scale == inc.x_scale);
          CHECK(c.h_scale == inc.h_scale);
          CHECK(c.combine_wire == inc.combine_wire);
          CHECK(c.bucket == bucket);
          if (k != Knob::weights) CHECK(c.weights == inc.weights);
          if (k == Knob::stage1)
            CHECK((c.stage2.token_tile == inc.stage2.token_tile && c.stage2.weight_tile == inc.stage2.weight_tile));
          if (k == Knob::stage2)
            CHECK((c.stage1.token_tile == inc.stage1.token_tile && c.stage1.weight_tile == inc.stage1.weight_tile));
          if (k == Knob::weights) CHECK(c.weights != inc.weights);
        }
        for (const Pruned& p : pruned) {
          CHECK_THROWS_AS(check_bucket(kimi, p.entry, "$", "test"), ConfigError);
          CHECK(!p.why.empty());
        }
        if (k == Knob::stage1 && x == XScale::per_block) {
          // Stage1 promotes: no 256-row weight tile, no token tile past 176.
          for (const BucketConfig& c : list) {
            CHECK(c.stage1.weight_tile == 128);
            CHECK(c.stage1.token_tile <= int(kHopperMaxBmPromoted));
          }
          if (bucket >= 4096) CHECK(!pruned.empty());
        }
      }
    }
  }
}

TEST_CASE("the stage candidates cover every tile and both weight tiles where the contract allows", "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  const BucketConfig inc = kimi.bucket(512);  // x row, h static: 256 weight rows allowed up to 96 tokens
  std::vector<Pruned> pruned;
  const std::vector<BucketConfig> list = candidates(kimi, inc, Knob::stage2, SpaceOptions{}, &pruned);
  const std::vector<int> tiles = token_tiles(kimi, 512);
  for (int t : tiles)
    for (int w : {128, 256}) {
      const bool want = !(t == inc.stage2.token_tile && w == inc.stage2.weight_tile);
      int found = 0;
      for (const BucketConfig& c : list) found += c.stage2.token_tile == t && c.stage2.weight_tile == w;
      int refused = 0;
      for (const Pruned& p : pruned) refused += p.entry.stage2.token_tile == t && p.entry.stage2.weight_tile == w;
      INFO("tile " << t << " x " << w);
      CHECK(found + refused == (want ? 1 : 0));
      if (w == 256 && t > int(kHopperMaxBmWide)) CHECK(refused == 1);
    }
  // The weight source: off where the space leaves it out.
  SpaceOptions no_resident;
  no_resident.fp8_resident = false;
  CHECK(candidates(kimi, inc, Knob::weights, no_resident).empty());
  CHECK(candidates(kimi, kimi.bucket(8192), Knob::weights, no_resident).empty());  // fp8-resident stays so
  const std::vector<BucketConfig> back = candidates(kimi, kimi.bucket(8192), Knob::weights, SpaceOptions{});
  REQUIRE(back.size() == 1);
  CHECK(back[0].weights == WeightSource::mxfp4);
  const std::vector<BucketConfig> flip = candidates(kimi, inc, Knob::weights, SpaceOptions{});
  REQUIRE(flip.size() == 1);
  CHECK(flip[0].weights == WeightSource::fp8_resident);
  CHECK(flip[0].stage1.weight_tile == 128);  // the fp8-resident kernels take 128-row tiles
}

TEST_CASE("with_modes narrows each stage's tiles to what its form allows", "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  // 512: Stage1 96 tokens over 256 weight rows; x per block makes Stage1 promote: 128 rows.
  const BucketConfig b512 = with_modes(kimi, kimi.bucket(512), {XScale::per_block, HScale::static_bound, CombineWire::bf16});
  CHECK(b512.stage1.weight_tile == 128);
  CHECK(b512.stage1.token_tile == 96);
  // 4096: Stage1 208 tokens; promoting, the widest is 176.
  const BucketConfig b4096 = with_modes(kimi, kimi.bucket(4096), {XScale::per_block, HScale::per_block, CombineWire::bf16});
  CHECK(b4096.stage1.token_tile == 176);
  CHECK(b4096.stage2.token_tile == 160);
  CHECK(allowed(kimi, b4096));
  // fp8-resident at 4096: Stage1's widest from the copy is 224 unpromoted; 208 stays.
  const BucketConfig r4096 = with_weights(kimi, kimi.bucket(4096), WeightSource::fp8_resident);
  CHECK(r4096.stage1.token_tile == 208);
  CHECK(allowed(kimi, r4096));
  // Every bucket of every built-in config stays within the contract under every mode it allows.
  for (const std::string& name : builtin_config_names()) {
    const Config c = load_config(name);
    for (const Modes& m : mode_candidates(c, modes_of(c.buckets[0]), SpaceOptions{}))
      for (const Modes& w : wire_candidates(m, SpaceOptions{}))
        for (const BucketConfig& b : c.buckets) {
          INFO(name << " bucket " << b.bucket << " " << to_string(w));
          CHECK(allowed(c, with_modes(c, b, w)));
          CHECK(allowed(c, with_weights(c, with_modes(c, b, w), WeightSource::fp8_resident)));
        }
  }
}

TEST_CASE("mode candidates: a static h only for a bounded activation; parse_modes names a bad part", "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4"), generic = load_config("generic_a8w4");
  std::vector<std::string> pruned;
  const std::vector<Modes> k = mode_candidates(kimi, modes_of(kimi.bucket(1)), SpaceOptions{}, &pruned);
  CHECK(k.size() == 4);
  CHECK(pruned.empty());
  CHECK(k[0] == modes_of(kimi.bucket(1)));  // the start first
  const std::vector<Modes> g = mode_candidates(generic, modes_of(generic.bucket(1)), SpaceOptions{}, &pruned);
  CHECK(g.size() == 2);
  for (const Modes& m : g) CHECK(m.h == HScale::per_block);
  REQUIRE(pruned.size() == 2);
  CHECK_THAT(pruned[0], Catch::Contains("silu has none"));
  SpaceOptions fixed;
  fixed.modes = false;
  CHECK(mode_candidates(kimi, modes_of(kimi.bucket(1)), fixed).size() == 1);
  CHECK(wire_candidates(k[0], SpaceOptions{}).size() == 2);
  fixed.fp8_wire = false;
  CHECK(wire_candidates(k[0], fixed).size() == 1);

  const Modes m = parse_modes("h=static,x=row,wire=fp8", {});
  CHECK(m.x == XScale::per_row);
  CHECK(m.h == HScale::static_bound);
  CHECK(m.wire == CombineWire::fp8_blockwise_1x32);
  CHECK(parse_modes("x=row", {}).h == HScale::per_block);
  CHECK_THROWS_WITH(parse_modes("x=col", {}), Catch::Contains("part 'x=col'"));
  CHECK_THROWS_WITH(parse_modes("x=row,x=block", {}), Catch::Contains("each of x, h and wire once"));
  CHECK_THROWS_WITH(parse_modes("", {}), Catch::Contains("expected x=block|row"));
}

TEST_CASE("dispatch candidates change one dispatch knob alone, over its listed values", "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  const BucketConfig inc = kimi.bucket(512);
  auto same_but_dispatch = [&](const BucketConfig& c) {
    BucketConfig a = c, b = inc;
    a.dispatch = b.dispatch = {};
    return entry_text(a) == entry_text(b);
  };
  const auto blocks = candidates(kimi, inc, Knob::dispatch_blocks, {});
  CHECK(blocks.size() == std::size(kDispatchBlocks) - (std::count(std::begin(kDispatchBlocks), std::end(kDispatchBlocks),
                                                                    inc.dispatch.cus)));
  for (const BucketConfig& c : blocks) {
    CHECK(same_but_dispatch(c));
    CHECK(c.dispatch.cus != inc.dispatch.cus);
    CHECK(std::count(std::begin(kDispatchBlocks), std::end(kDispatchBlocks), c.dispatch.cus) == 1);
    CHECK((c.dispatch.persistent == inc.dispatch.persistent && c.dispatch.stride == inc.dispatch.stride));
  }
  const auto persistent = candidates(kimi, inc, Knob::dispatch_persistent, {});
  REQUIRE(persistent.size() == 1);
  CHECK(same_but_dispatch(persistent[0]));
  CHECK(persistent[0].dispatch.persistent != inc.dispatch.persistent);
  CHECK(persistent[0].dispatch.cus == inc.dispatch.cus);
  const auto strides = candidates(kimi, inc, Knob::dispatch_stride, {});
  CHECK(strides.size() == std::size(kDispatchStrides) - 1);  // the shipped stride is one of them
  for (const BucketConfig& c : strides) {
    CHECK(same_but_dispatch(c));
    CHECK(c.dispatch.stride != inc.dispatch.stride);
    CHECK(c.dispatch.cus == inc.dispatch.cus);
  }
}

TEST_CASE("tokens_at_world: the most tokens a rank passes where a key is taken at a world, 0 where none", "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");  // 896 experts, keys at 112 a rank (EP8)
  REQUIRE(kimi.keys_experts_per_rank == 112);
  for (int b : {1, 2, 64, 8192}) CHECK(tokens_at_world(kimi, 8, b) == b);
  for (int b : {1, 2, 64, 8192}) CHECK(tokens_at_world(kimi, 4, b) == 2 * b);  // 224 experts a rank
  CHECK(tokens_at_world(kimi, 16, 1) == 0);  // 56 experts a rank: one token already takes key 2
  CHECK(tokens_at_world(kimi, 16, 2) == 1);
  CHECK(tokens_at_world(kimi, 16, 1024) == 512);
  CHECK(tokens_at_world(kimi, 2, 8192) == 32768);
  CHECK(tokens_at_world(kimi, 2, 16384) == 0);  // 65536 tokens a rank: past what a call passes
  for (int world : {2, 4, 8, 16})
    for (int b = 1; b <= 8192; b *= 2)
      if (const std::int64_t t = tokens_at_world(kimi, world, b)) {
        const Config c = config_for_world(kimi, world);
        CHECK(c.table_key(t) == b);
        if (t < 32768) CHECK(c.table_key(t + 1) > b);  // the most (32768: the most a call passes)
      }
  CHECK_THROWS_AS(tokens_at_world(kimi, 3, 64), Error);  // 896 experts do not split over 3 ranks
}

TEST_CASE("a bucket's knobs as the tuner labels them", "[tune]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  CHECK_THAT(tactic_label(kimi.bucket(512)), Catch::Equals("s1 96x256 s2 96x128 mxfp4 x row h static wire bf16"));
  CHECK_THAT(dispatch_label(kimi.bucket(512)), Catch::StartsWith("dispatch "));
}
