// The config schema: both built-in configs load; every kind of mistake is rejected with a
// ConfigError naming the file, the JSON path, the value and what was expected.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;
using json = nlohmann::json;

namespace {

json valid() {
  return json::parse(R"({
    "schema": "megamoe-config/1",
    "name": "t",
    "model": {"experts_per_rank": 8, "model_dim": 256, "inter_dim": 128, "topk": 2},
    "activation": {"kind": "situv2", "beta": 4.0, "linear_beta": 25.0},
    "quant": {"activations": "fp8_e4m3", "weights": "mxfp4", "dispatch_wire": "fp8_e4m3_1x32"},
    "bucket_defaults": {
      "stage1": {"bm": 64, "bn": 128}, "stage2": {"bm": 64, "bn": 128},
      "dispatch": {"cus": 32, "persistent": true, "stride": 1},
      "stage2_two_stage_b": false, "combine_wire": "bf16", "bounds_check": false},
    "buckets": {"8": {"stage1": {"bm": 16}, "dispatch": {"cus": 8}}}
  })");
}

// Parses `doc` and returns the ConfigError it must raise.
ConfigError rejection(const json& doc) {
  try {
    parse_config(doc.dump(), "cfg/t.json");
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("config was accepted: " << doc.dump());
  throw;
}

}  // namespace

TEST_CASE("a valid config parses with defaults merged under bucket overrides", "[config]") {
  Config c = parse_config(valid().dump(), "cfg/t.json");
  CHECK(c.name == "t");
  CHECK(c.activation.kind == ActivationKind::situv2);
  CHECK(c.activation.beta == 4.0f);
  CHECK(c.activation.linear_beta == 25.0f);
  const BucketConfig& b8 = c.bucket(8);
  CHECK(b8.stage1.bm == 16);     // overridden
  CHECK(b8.stage1.bn == 128);    // from defaults, though stage1 was partly overridden
  CHECK(b8.dispatch.cus == 8);
  CHECK(b8.dispatch.persistent);  // from defaults
  CHECK(c.bucket(16).stage1.bm == 64);
  CHECK(c.bucket(32768).combine_wire == CombineWire::bf16);
  CHECK_FALSE(b8.fused_stages);  // optional: off unless a bucket says otherwise

  json fused = valid();
  fused["buckets"]["8"]["stage2"] = {{"bm", 16}};
  fused["buckets"]["8"]["fused_stages"] = true;
  Config f = parse_config(fused.dump(), "cfg/t.json");
  CHECK(f.bucket(8).fused_stages);
  CHECK_FALSE(f.bucket(16).fused_stages);

  // weights: optional, mxfp4 unless a bucket (or the defaults) says fp8_resident.
  CHECK(b8.weights == WeightSource::mxfp4);
  json res = valid();
  res["buckets"]["8"]["weights"] = "fp8_resident";
  Config r = parse_config(res.dump(), "cfg/t.json");
  CHECK(r.bucket(8).weights == WeightSource::fp8_resident);
  CHECK(r.bucket(16).weights == WeightSource::mxfp4);
  CHECK(to_string(r.bucket(8).weights) == "fp8_resident");
}

TEST_CASE("the built-in configs load", "[config]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  Config k = load_config("kimi_k3_a8w4");
  CHECK(k.model.experts_per_rank == 112);
  CHECK(k.model.model_dim == 3584);
  CHECK(k.model.inter_dim == 3072);
  CHECK(k.model.topk == 16);
  CHECK(k.activation.kind == ActivationKind::situv2);
  Config g = load_config("generic_a8w4");
  CHECK(g.model.experts_per_rank == 32);
  CHECK(g.activation.kind == ActivationKind::silu);
  CHECK(g.bucket(1).dispatch.cus == 32);
  for (auto& b : k.buckets) CHECK_FALSE(b.bounds_check);
}

TEST_CASE("config errors: unknown field", "[config]") {
  json d = valid();
  d["bucket_defaults"]["stage1"]["bk"] = 32;
  ConfigError e = rejection(d);
  CHECK(e.file == "cfg/t.json");
  CHECK(e.json_path == "$.bucket_defaults.stage1.bk");
  CHECK(e.value == "32");
  CHECK_THAT(e.expected, Catch::Contains("no such field") && Catch::Contains("known fields: bm, bn"));
  CHECK_THAT(std::string(e.what()), Catch::Contains("cfg/t.json") && Catch::Contains("$.bucket_defaults.stage1.bk"));

  json top = valid();
  top["colour"] = "red";
  CHECK(rejection(top).json_path == "$.colour");
  json act = valid();
  act["activation"] = {{"kind", "silu"}, {"beta", 1.0}};  // silu takes no parameters
  CHECK(rejection(act).json_path == "$.activation.beta");
}

TEST_CASE("config errors: missing field", "[config]") {
  json d = valid();
  d["model"].erase("topk");
  ConfigError e = rejection(d);
  CHECK(e.json_path == "$.model.topk");
  CHECK(e.value == "(missing)");

  json b = valid();
  b["bucket_defaults"]["stage2"].erase("bn");
  ConfigError eb = rejection(b);
  CHECK(eb.json_path == "$.bucket_defaults.stage2.bn");  // no bucket sets it either
  CHECK_THAT(eb.expected, Catch::Contains("bucket_defaults"));

  json o = valid();  // missing from the defaults but set by one bucket: the others lack it
  o["bucket_defaults"].erase("combine_wire");
  o["buckets"]["8"]["combine_wire"] = "bf16";
  CHECK(rejection(o).json_path == "$.bucket_defaults.combine_wire");

  json s = valid();
  s["activation"].erase("linear_beta");
  CHECK(rejection(s).json_path == "$.activation.linear_beta");
}

TEST_CASE("config errors: wrong type", "[config]") {
  json d = valid();
  d["model"]["model_dim"] = "3584";
  ConfigError e = rejection(d);
  CHECK(e.json_path == "$.model.model_dim");
  CHECK(e.value == "\"3584\"");
  CHECK_THAT(e.expected, Catch::Contains("integer"));

  json f = valid();
  f["buckets"]["8"]["stage2_two_stage_b"] = 1;
  CHECK(rejection(f).json_path == "$.buckets.8.stage2_two_stage_b");
  json g = valid();
  g["bucket_defaults"]["stage1"] = 64;
  CHECK(rejection(g).json_path == "$.bucket_defaults.stage1");
  json h = valid();
  h["model"]["topk"] = 2.5;
  CHECK(rejection(h).json_path == "$.model.topk");
}

TEST_CASE("config errors: impossible values", "[config]") {
  auto path_of = [](auto mutate) {
    json d = valid();
    mutate(d);
    return rejection(d);
  };
  ConfigError bm = path_of([](json& d) { d["buckets"]["8"]["stage1"]["bm"] = 40; });
  CHECK(bm.json_path == "$.buckets.8.stage1.bm");
  CHECK(bm.value == "40");
  CHECK_THAT(bm.expected, Catch::Contains("multiple of 16"));
  CHECK(path_of([](json& d) { d["bucket_defaults"]["stage2"]["bn"] = 100; }).json_path ==
        "$.bucket_defaults.stage2.bn");
  CHECK(path_of([](json& d) { d["bucket_defaults"]["dispatch"]["cus"] = 0; }).json_path ==
        "$.bucket_defaults.dispatch.cus");
  CHECK(path_of([](json& d) { d["activation"]["beta"] = -1.0; }).json_path == "$.activation.beta");
  CHECK(path_of([](json& d) { d["model"]["inter_dim"] = 100; }).json_path == "$.model.inter_dim");
  CHECK(path_of([](json& d) { d["activation"]["kind"] = "gelu"; }).json_path == "$.activation.kind");
  CHECK(path_of([](json& d) { d["bucket_defaults"]["combine_wire"] = "fp4"; }).json_path ==
        "$.bucket_defaults.combine_wire");
  // Both stages in one kernel share a token tile: stage1.bm 16 against stage2.bm 64 at bucket 8.
  ConfigError fused = path_of([](json& d) { d["buckets"]["8"]["fused_stages"] = true; });
  CHECK(fused.json_path == "$.buckets.8.fused_stages");
  CHECK_THAT(fused.expected, Catch::Contains("stage1.bm (16)") && Catch::Contains("stage2.bm (64)"));
  CHECK(path_of([](json& d) { d["bucket_defaults"]["fused_stages"] = 1; }).json_path ==
        "$.bucket_defaults.fused_stages");
  // The weights' source: one of two names; and the fused kernel reads only MXFP4.
  ConfigError w = path_of([](json& d) { d["buckets"]["8"]["weights"] = "fp8"; });
  CHECK(w.json_path == "$.buckets.8.weights");
  CHECK_THAT(w.expected, Catch::Contains("\"mxfp4\"") && Catch::Contains("\"fp8_resident\""));
  ConfigError wf = path_of([](json& d) {
    d["buckets"]["8"]["stage2"] = {{"bm", 16}};
    d["buckets"]["8"]["fused_stages"] = true;
    d["buckets"]["8"]["weights"] = "fp8_resident";
  });
  CHECK(wf.json_path == "$.buckets.8.weights");
  CHECK_THAT(wf.expected, Catch::Contains("fused_stages"));
  // A tile that does not divide the GEMM's N: inter_dim 128 is not a multiple of 96.
  ConfigError fit = path_of([](json& d) { d["buckets"]["8"]["stage1"]["bn"] = 96; });
  CHECK(fit.json_path == "$.buckets.8.stage1.bn");
  CHECK_THAT(fit.expected, Catch::Contains("inter_dim"));
  // Bucket keys are powers of two from 1 to 32768.
  for (const char* key : {"3", "0", "65536", "08", "x"}) {
    ConfigError k = path_of([&](json& d) { d["buckets"][key] = json::object(); });
    CHECK(k.json_path == std::string("$.buckets.") + key);
    CHECK_THAT(k.expected, Catch::Contains("power of two"));
  }
}

TEST_CASE("config errors: not JSON, or a name that is not the file's", "[config]") {
  try {
    parse_config("{ \"schema\": ", "cfg/t.json");
    FAIL("accepted broken JSON");
  } catch (const ConfigError& e) {
    CHECK(e.json_path == "$");
    CHECK_THAT(e.expected, Catch::Contains("valid JSON"));
  }
  test::TempDir dir;
  test::write_text(dir.path() / "other.json", valid().dump());  // its name says "t"
  try {
    load_config((dir.path() / "other.json").string());
    FAIL("accepted a config whose name differs from its file");
  } catch (const ConfigError& e) {
    CHECK(e.json_path == "$.name");
  }
}

TEST_CASE("configs are found in MEGAMOE_CONFIG_DIR before the built-in ones", "[config]") {
  test::TempDir dir;
  json d = valid();
  d["name"] = "kimi_k3_a8w4";
  d["model"]["topk"] = 3;
  test::write_text(dir.path() / "kimi_k3_a8w4.json", d.dump());
  test::ScopedEnv env("MEGAMOE_CONFIG_DIR", dir.path().string());
  CHECK(load_config("kimi_k3_a8w4").model.topk == 3);
  CHECK_THROWS_WITH(load_config("no_such_config"), Catch::Contains("no config named 'no_such_config'"));
}

TEST_CASE("MEGAMOE_BOUNDS_CHECK=1 turns the checked build on for every bucket", "[config]") {
  test::ScopedEnv on("MEGAMOE_BOUNDS_CHECK", "1");
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  for (auto& b : load_config("kimi_k3_a8w4").buckets) CHECK(b.bounds_check);
}

TEST_CASE("with_buckets_of gives one config's model the other's bucket table, or names the bucket that "
          "does not fit",
          "[config]") {
  const Config model = parse_config(valid().dump(), "cfg/t.json");
  json other_doc = valid();
  other_doc["name"] = "u";
  other_doc["model"]["inter_dim"] = 384;  // the other's own tiles fit its own model
  other_doc["bucket_defaults"]["stage2"]["bm"] = 32;
  other_doc["buckets"]["8"]["dispatch"]["cus"] = 4;
  const Config other = parse_config(other_doc.dump(), "cfg/u.json");

  const Config both = with_buckets_of(model, other);
  CHECK(both.name == "t_with_u_buckets");
  CHECK(both.model.inter_dim == 128);  // the model's shape, activation and formats
  CHECK(both.activation.kind == model.activation.kind);
  for (int i = 0; i < kBucketCount; ++i) {  // every bucket the other's
    CHECK(both.buckets[i].bucket == other.buckets[i].bucket);
    CHECK(both.buckets[i].stage2.bm == other.buckets[i].stage2.bm);
    CHECK(both.buckets[i].dispatch.cus == other.buckets[i].dispatch.cus);
  }
  CHECK(both.bucket(8).dispatch.cus == 4);
  CHECK(both.bucket(16).stage2.bm == 32);

  json wide = other_doc;  // tiles of 256 columns fit u (inter_dim 256) but not t (128)
  wide["model"]["inter_dim"] = 256;
  wide["bucket_defaults"]["stage1"]["bn"] = 256;
  const Config wide_cfg = parse_config(wide.dump(), "cfg/u.json");
  try {
    with_buckets_of(model, wide_cfg);
    FAIL("a bucket table whose tiles do not fit the model was accepted");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("u's bucket 1.stage1.bn"));
    CHECK_THAT(e.what(), Catch::Contains("a divisor of model.inter_dim (128)"));
  }
}
