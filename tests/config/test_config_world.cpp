// A config resolved for a world size: the experts a rank holds, the errors for a world that does
// not divide the model, and the bucket table keyed by mean rows per expert (one table for every
// world size).
#include <catch2/catch.hpp>

#include "config/shared_slots.hpp"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"
#include "megamoe/runtime.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {

Config kimi() {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  return load_config("kimi_k3_a8w4");
}

// The bucket table key of `tokens` at an independent formula: the bucket of
// ceil(tokens x keys / held), capped at 32768.
int expected_key(std::int64_t tokens, std::int64_t keys, std::int64_t held) {
  std::int64_t t = (tokens * keys + held - 1) / held;
  if (t > kMaxBucket) t = kMaxBucket;
  int b = 1;
  while (b < t) b *= 2;
  return b;
}

}  // namespace

TEST_CASE("a rank holds model.experts / world experts", "[config][world]") {
  const Config k = kimi();
  for (int world : {1, 2, 4, 7, 8, 14, 16}) {
    const Config r = config_for_world(k, world);
    CHECK(r.world == world);
    CHECK(r.model.experts == 896);
    CHECK(r.model.experts_per_rank == 896 / world);
    CHECK(r.keys_experts_per_rank == 112);
  }
  const Config again = config_for_world(config_for_world(k, 16), 8);  // from the model's count, not a rank's
  CHECK(again.model.experts_per_rank == 112);
}

TEST_CASE("a world that does not divide the experts is an error naming both and the sizes that do", "[config][world]") {
  const Config k = kimi();
  CHECK_THROWS_WITH(config_for_world(k, 3), Catch::Contains("model.experts = 896") && Catch::Contains("world = 3") &&
                                                Catch::Contains("1, 2, 4, 7, 8, 14, 16"));
  CHECK_THROWS_WITH(config_for_world(k, 0), Catch::Contains("world = 0"));
  CHECK_THROWS_WITH(config_for_world(with_experts(k, 2048), 1),
                    Catch::Contains("2048") && Catch::Contains("at most 1024") && Catch::Contains("more ranks"));
  CHECK(config_for_world(with_experts(k, 2048), 2).model.experts_per_rank == 1024);
  Config huge = k;  // past the schema's bound, set in code
  huge.model.experts = 16384;
  CHECK_THROWS_WITH(config_for_world(huge, 16), Catch::Contains("16384") && Catch::Contains("1..8192"));
}

TEST_CASE("the bucket table follows the mean rows per expert", "[config][world][buckets]") {
  const Config k = kimi();
  for (int world : {1, 2, 4, 8, 16}) {
    const Config r = config_for_world(k, world);
    for (std::int64_t tokens : {0, 1, 2, 3, 5, 100, 1000, 1024, 3000, 4096, 8191, 20000, 32768}) {
      INFO("world " << world << ", " << tokens << " tokens");
      const int key = r.table_key(tokens);
      CHECK(key == expected_key(tokens, 112, 896 / world));
      CHECK(&r.bucket_for_tokens(tokens) == &r.bucket(key));
    }
  }
  // EP8 is where the keys count: each call takes its own bucket. EP16 takes twice the tokens'.
  CHECK(config_for_world(k, 8).bucket_for_tokens(3000).stage1.token_tile == 208);      // 4096's
  CHECK(config_for_world(k, 16).bucket_for_tokens(1500).stage1.token_tile == 208);     // 3000 -> 4096's
  CHECK(config_for_world(k, 16).bucket_for_tokens(1500).stage2.token_tile == 160);
  CHECK(config_for_world(k, 1).bucket_for_tokens(8192).stage1.token_tile == 176);     // 1024's
  CHECK(config_for_world(k, 16).table_key(32768) == 32768);                            // the densest entry
  CHECK_THROWS_WITH(config_for_world(k, 16).table_key(32769), Catch::Contains("32769"));
  CHECK_THROWS_AS(config_for_world(k, 16).table_key(-1), Error);
  // A config without bucket_keys counts at its model's experts: world 1 is the identity.
  const Config g = load_config("generic_a8w4");
  for (std::int64_t tokens : {1, 7, 300, 32768}) CHECK(g.table_key(tokens) == bucket_for_tokens(tokens));
  CHECK(config_for_world(g, 2).table_key(300) == 1024);  // 16 experts a rank: 600 tokens' density
}

TEST_CASE("with_experts cuts a model to fewer experts, the bucket keys where they were", "[config][world]") {
  const Config k = kimi();
  const Config share = with_experts(k, 112);
  CHECK(share.name == "kimi_k3_a8w4_112_experts");
  CHECK(share.model.experts == 112);
  CHECK(share.model.experts_per_rank == 112);
  CHECK(share.keys_experts_per_rank == 112);
  CHECK(share.model.model_dim == k.model.model_dim);
  for (std::int64_t tokens : {1, 9, 1000, 8192}) CHECK(share.table_key(tokens) == bucket_for_tokens(tokens));
  CHECK_THROWS_WITH(with_experts(k, 0), Catch::Contains("0 experts"));
  CHECK_THROWS_WITH(with_experts(k, 9000), Catch::Contains("9000"));
}

TEST_CASE("with_redundant_experts adds slots beyond the model's experts; a rank holds slots / world", "[config][world][eplb]") {
  const Config k = kimi();
  CHECK(k.model.logical_experts == 896);
  const Config eplb = config_for_world(with_redundant_experts(k, 64), 8);  // 960 slots, 120 a rank
  CHECK(eplb.name == "kimi_k3_a8w4_plus_64_slots");
  CHECK(eplb.model.experts == 960);
  CHECK(eplb.model.logical_experts == 896);
  CHECK(eplb.model.experts_per_rank == 120);
  CHECK(eplb.keys_experts_per_rank == 112);  // the keys stay: a call takes the entry of its rows per slot
  CHECK(eplb.table_key(1000) == expected_key(1000, 112, 120));
  CHECK(with_redundant_experts(k, 0).name == k.name);
  CHECK_THROWS_WITH(with_redundant_experts(k, -1), Catch::Contains("redundant_experts = -1"));
  CHECK_THROWS_WITH(with_redundant_experts(k, 100000), Catch::Contains("redundant_experts = 100000"));
}

TEST_CASE("RuntimeOptions.redundant_experts that leaves slots the world does not divide is named, with one that fits",
          "[config][world][eplb]") {
  RuntimeOptions o;
  o.world = 8, o.max_tokens = 64, o.path = KernelPath::hopper, o.redundant_experts = 60;
  CHECK_THROWS_WITH(Runtime::workspace_bytes(kimi(), o),
                    Catch::Contains("RuntimeOptions.redundant_experts = 60: 896 logical experts + 60 = 956 slots") &&
                        Catch::Contains("64 would"));
  o.redundant_experts = 64;
  RuntimeOptions plain = o;
  plain.redundant_experts = 0;
  // Each rank holds 120 slots instead of 112: its plan of a call grows by 8 slots' words.
  const std::size_t more = Runtime::workspace_bytes(kimi(), o).group_plan - Runtime::workspace_bytes(kimi(), plain).group_plan;
  CHECK(more == std::size_t(3 * 8 * 8 * 4 + 256 * 8 * 8 * 4));  // segment, segment_rows, ready; block counts
}

TEST_CASE("with_shared_experts names shared experts and their weight; the kernels' slots add them a rank and a token",
          "[config][world][shared]") {
  const Config k = kimi();
  CHECK(k.model.shared_experts == 0);
  const Config s = with_shared_experts(k, 2, 0.5f);
  CHECK(s.name == "kimi_k3_a8w4_with_2_shared");
  CHECK(s.model.shared_experts == 2);
  CHECK(s.model.shared_expert_scale == 0.5f);
  CHECK(s.model.topk == k.model.topk);  // the caller's topk and experts stay the model's
  CHECK(s.model.experts == k.model.experts);
  CHECK(with_shared_experts(s, 2, 0.5f).name == s.name);
  CHECK(with_shared_experts(k, 0).name == k.name);
  const Config off = with_shared_experts(s, 0);
  CHECK(off.model.shared_experts == 0);
  CHECK(off.name == "kimi_k3_a8w4_with_2_shared_without_shared");
  CHECK_THROWS_WITH(with_shared_experts(k, -1), Catch::Contains("shared_experts = -1"));
  CHECK_THROWS_WITH(with_shared_experts(k, kMaxSharedExperts + 1), Catch::Contains("shared_experts = 17"));
  CHECK_THROWS_WITH(with_shared_experts(k, 1, INFINITY), Catch::Contains("shared_expert_scale = inf"));
  // The kernels' view: each rank S more slots, each token S more.
  const Config ep8 = shared_slots_config(config_for_world(s, 8));
  CHECK(ep8.model.experts_per_rank == 112 + 2);
  CHECK(ep8.model.experts == 8 * 114);
  CHECK(ep8.model.topk == 16 + 2);
  CHECK(ep8.model.shared_experts == 2);
  CHECK(shared_slots_config(config_for_world(k, 8)).model.experts_per_rank == 112);  // none: unchanged
  // 1024 slots a rank at most: 1024 experts on one rank leave no room for a shared one.
  CHECK_THROWS_WITH(shared_slots_config(config_for_world(with_shared_experts(with_experts(k, 1024), 1), 1)),
                    Catch::Contains("1024 experts a rank and 1 shared ones take 1025 slots a rank"));
}

TEST_CASE("shared experts widen a rank's workspace by their rows", "[config][world][shared][workspace]") {
  RuntimeOptions o;
  o.world = 8, o.max_tokens = 256, o.path = KernelPath::hopper;
  const WorkspaceBytes plain = Runtime::workspace_bytes(kimi(), o);
  const WorkspaceBytes shared = Runtime::workspace_bytes(with_shared_experts(kimi(), 1), o);
  // The worst case: every token of every rank's 16 routed rows here, and each of its own tokens once more.
  CHECK(plain.routed_rows == 8LL * 256 * 16);
  CHECK(shared.routed_rows == 8LL * 256 * 16 + 256);
  CHECK(shared.total() > plain.total());
}
