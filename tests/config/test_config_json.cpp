// The tuned config's JSON: every built-in config written by config_json reads back to itself.
#include <catch2/catch.hpp>

#include "common/embedded_files.hpp"
#include "megamoe/errors.hpp"
#include "config/config_json.hpp"

using namespace megamoe;

TEST_CASE("config_json reads back to the config it was written from, for every built-in config", "[config]") {
  for (const std::string& name : builtin_config_names()) {
    INFO(name);
    const Config c = load_config(name);
    const nlohmann::ordered_json j = config_json(c, "written_back", "a test");
    const std::string text = config_text(j);
    const Config back = parse_config(text, "written_back.json");
    CHECK(nlohmann::ordered_json::parse(text) == j);
    CHECK(back.name == "written_back");
    CHECK(back.model.experts == c.model.experts);
    CHECK(back.model.model_dim == c.model.model_dim);
    CHECK(back.model.inter_dim == c.model.inter_dim);
    CHECK(back.model.topk == c.model.topk);
    CHECK(back.model.expert_biases == c.model.expert_biases);
    CHECK(back.keys_experts_per_rank == c.keys_experts_per_rank);
    CHECK(back.activation.kind == c.activation.kind);
    CHECK(back.activation.beta == c.activation.beta);
    CHECK(back.activation.linear_beta == c.activation.linear_beta);
    CHECK(back.activation.limit == c.activation.limit);
    CHECK(back.activation.alpha == c.activation.alpha);
    CHECK(back.activation.up_offset == c.activation.up_offset);
    for (int i = 0; i < kBucketCount; ++i) CHECK(entry_text(back.buckets[i]) == entry_text(c.buckets[i]));
    // Buckets equal to the defaults are not repeated.
    CHECK(j["buckets"].size() < std::size_t(kBucketCount));
  }
  // As the built-in configs are written: a line a bucket; floats as written, not their binary
  // expansion.
  const std::string kimi = config_text(config_json(load_config("kimi_k3_a8w4"), "kimi_k3_a8w4", "x"));
  CHECK_THAT(kimi, Catch::Contains("\n  \"model\": {\"experts\": 896, \"model_dim\": 3584, \"inter_dim\": 3072, \"topk\": 16},\n"));
  CHECK_THAT(kimi, Catch::Contains("\n    \"512\":   {\"stage1\": {\"token_tile\": 96, \"weight_tile\": 256}"));
  const std::string text = config_json(load_config("gpt_oss_120b_a8w4"), "x", "").dump();
  CHECK_THAT(text, Catch::Contains("\"alpha\":1.702"));
}

TEST_CASE("the built-in configs are written as config_text writes a table (the tuner's form)", "[config]") {
  for (const auto& f : embedded::configs()) {
    INFO(f.path);
    const Config c = parse_config(f.text, std::string(f.path));
    const std::string description = nlohmann::json::parse(f.text)["description"];
    CHECK(config_text(config_json(c, c.name, description)) == std::string(f.text));
  }
}

TEST_CASE("a bucket entry round-trips through its text, checked by the schema", "[config]") {
  const Config kimi = load_config("kimi_k3_a8w4");
  for (const BucketConfig& b : kimi.buckets) {
    const BucketConfig back = entry_from_text(kimi, b.bucket, entry_text(b));
    CHECK(entry_text(back) == entry_text(b));
    CHECK(back.bucket == b.bucket);
  }
  // A journal entry the contract refuses (a 256-token Stage1 tile over 256 weight rows) is an error.
  BucketConfig bad = kimi.bucket(512);
  bad.stage1.token_tile = 256;
  CHECK_THROWS_AS(entry_from_text(kimi, 512, entry_text(bad)), ConfigError);
}
