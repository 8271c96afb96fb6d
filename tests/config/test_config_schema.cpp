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
    "schema": "megamoe-config/2",
    "name": "t",
    "model": {"experts": 8, "model_dim": 256, "inter_dim": 128, "topk": 2},
    "activation": {"kind": "situv2", "beta": 4.0, "linear_beta": 25.0},
    "quant": {"activations": "fp8_e4m3", "weights": "mxfp4"},
    "bucket_defaults": {
      "stage1": {"token_tile": 64}, "stage2": {"token_tile": 64},
      "dispatch": {"cus": 32, "persistent": true, "stride": 1},
      "combine_wire": "bf16", "bounds_check": false},
    "buckets": {"8": {"stage1": {"token_tile": 16}, "dispatch": {"cus": 8}}}
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
  CHECK(b8.stage1.token_tile == 16);  // overridden
  CHECK(b8.stage2.token_tile == 64);  // from defaults
  CHECK(b8.dispatch.cus == 8);
  CHECK(b8.dispatch.persistent);  // from defaults, though dispatch was partly overridden
  CHECK(c.bucket(16).stage1.token_tile == 64);
  CHECK(c.bucket(32768).combine_wire == CombineWire::bf16);

  // weights: optional, mxfp4 unless a bucket (or the defaults) says fp8_resident.
  CHECK(b8.weights == WeightSource::mxfp4);
  json res = valid();
  res["buckets"]["8"]["weights"] = "fp8_resident";
  Config r = parse_config(res.dump(), "cfg/t.json");
  CHECK(r.bucket(8).weights == WeightSource::fp8_resident);
  CHECK(r.bucket(16).weights == WeightSource::mxfp4);
  CHECK(to_string(r.bucket(8).weights) == "fp8_resident");

  // scale modes: optional, per block unless a bucket (or the defaults) says otherwise.
  CHECK(b8.x_scale == XScale::per_block);
  CHECK(b8.h_scale == HScale::per_block);
  json modes = valid();
  modes["bucket_defaults"]["x_scale"] = "row";
  modes["buckets"]["8"]["h_scale"] = "static";
  modes["buckets"]["8"]["x_scale"] = "block";
  Config m = parse_config(modes.dump(), "cfg/t.json");
  CHECK(m.bucket(8).x_scale == XScale::per_block);
  CHECK(m.bucket(8).h_scale == HScale::static_bound);
  CHECK(m.bucket(16).x_scale == XScale::per_row);
  CHECK(m.bucket(16).h_scale == HScale::per_block);
  CHECK(to_string(m.bucket(16).x_scale) == "row");
  CHECK(to_string(m.bucket(8).h_scale) == "static");
}

TEST_CASE("a static h scale needs a bounded activation: a SiLU config that asks for one is refused", "[config]") {
  json doc = valid();
  doc["activation"] = {{"kind", "silu"}};
  doc["buckets"]["8"]["h_scale"] = "static";
  ConfigError e = rejection(doc);
  CHECK(e.json_path == "$.buckets.8.h_scale");
  CHECK(e.value == "\"static\"");
  CHECK_THAT(e.expected, Catch::Contains("\"block\"") && Catch::Contains("silu") && Catch::Contains("bound"));
  doc["buckets"]["8"].erase("h_scale");
  CHECK_NOTHROW(parse_config(doc.dump(), "cfg/t.json"));
  // A bounded model's table that takes one cannot serve a SiLU model.
  json bounded = valid();
  bounded["bucket_defaults"]["h_scale"] = "static";
  const Config table = parse_config(bounded.dump(), "cfg/t.json");
  const Config silu = parse_config(doc.dump(), "cfg/t.json");
  CHECK_THROWS_WITH(with_buckets_of(silu, table), Catch::Contains("static h scale") && Catch::Contains("silu"));
  CHECK_NOTHROW(with_buckets_of(table, silu));
}

// A stage's weight_tile (the Hopper kernels' weight rows a block): 128 unless set; 256 only where
// the stage sums with no promotion, from MXFP4 weights, on token tiles up to kHopperMaxBmWide and
// weight rows it divides; each refusal names the field, its value and why.
TEST_CASE("a 256-row weight tile is taken where its stage can run it, refused with the reason elsewhere", "[config]") {
  json doc = valid();  // model_dim 256, inter_dim 128: 256 and 256 weight rows
  doc["bucket_defaults"]["x_scale"] = "row";
  doc["bucket_defaults"]["h_scale"] = "static";
  doc["buckets"]["8"]["stage1"]["weight_tile"] = 256;
  doc["buckets"]["8"]["stage2"] = {{"token_tile", 96}, {"weight_tile", 256}};
  const Config c = parse_config(doc.dump(), "cfg/t.json");
  CHECK(c.bucket(8).stage1.weight_tile == 256);
  CHECK(c.bucket(8).stage2.weight_tile == 256);
  CHECK(c.bucket(16).stage1.weight_tile == 128);  // unset: 128
  CHECK(c.bucket(8).stage2.token_tile == 96);

  auto refused = [&](auto mutate) {
    json d = doc;
    mutate(d);
    return rejection(d);
  };
  ConfigError v = refused([](json& d) { d["buckets"]["8"]["stage1"]["weight_tile"] = 192; });
  CHECK(v.json_path == "$.buckets.8.stage1.weight_tile");
  CHECK(v.value == "192");
  CHECK_THAT(v.expected, Catch::Contains("128 or 256"));
  ConfigError px = refused([](json& d) { d["buckets"]["8"]["x_scale"] = "block"; });
  CHECK(px.json_path == "$.buckets.8.stage1.weight_tile");
  CHECK(px.value == "256");
  CHECK_THAT(px.expected, Catch::Contains("x_scale") && Catch::Contains("row"));
  ConfigError ph = refused([](json& d) { d["buckets"]["8"]["h_scale"] = "block"; });
  CHECK(ph.json_path == "$.buckets.8.stage2.weight_tile");
  CHECK_THAT(ph.expected, Catch::Contains("h_scale") && Catch::Contains("static"));
  ConfigError res = refused([](json& d) { d["buckets"]["8"]["weights"] = "fp8_resident"; });
  CHECK(res.json_path == "$.buckets.8.stage1.weight_tile");
  CHECK_THAT(res.expected, Catch::Contains("fp8-resident"));
  ConfigError wide = refused([](json& d) { d["buckets"]["8"]["stage2"]["token_tile"] = 112; });
  CHECK(wide.json_path == "$.buckets.8.stage2.weight_tile");
  CHECK_THAT(wide.expected, Catch::Contains("token_tile of at most 96") && Catch::Contains("112"));
  ConfigError rows = refused([](json& d) { d["model"]["model_dim"] = 384; });
  CHECK(rows.json_path == "$.buckets.8.stage2.weight_tile");
  CHECK_THAT(rows.expected, Catch::Contains("384") && Catch::Contains("model_dim") && Catch::Contains("256"));

  // A table of 256-row tiles cannot serve a model whose weight rows they do not divide.
  json odd = valid();
  odd["model"]["model_dim"] = 384;
  const Config odd_model = parse_config(odd.dump(), "cfg/t.json");
  CHECK_THROWS_AS(with_buckets_of(odd_model, c), ConfigError);
  CHECK_NOTHROW(with_buckets_of(c, odd_model));
}

// A token tile up to what the Hopper kernels of the stage's form take (hopper_max_bm): 176 where
// the stage promotes, 256 where it does not, Stage2's 192 (its region); past it the config names
// the field, the value, the limit and why.
TEST_CASE("a token tile is taken up to its stage form's limit, refused with the reason past it", "[config]") {
  json doc = valid();
  doc["buckets"]["8"]["stage1"] = {{"token_tile", 176}};
  doc["buckets"]["8"]["stage2"] = {{"token_tile", 176}};
  CHECK(parse_config(doc.dump(), "cfg/t.json").bucket(8).stage1.token_tile == 176);
  auto refusal = [&](json d, const char* stage, int tile) {
    d["buckets"]["8"][stage] = {{"token_tile", tile}};
    return rejection(d);
  };
  ConfigError p1 = refusal(doc, "stage1", 192);  // x per block promotes
  CHECK(p1.json_path == "$.buckets.8.stage1.token_tile");
  CHECK(p1.value == "192");
  CHECK_THAT(p1.expected, Catch::Contains("up to 176") && Catch::Contains("x_scale") && Catch::Contains("256"));
  ConfigError p2 = refusal(doc, "stage2", 192);  // h per 128 promotes
  CHECK(p2.json_path == "$.buckets.8.stage2.token_tile");
  CHECK_THAT(p2.expected, Catch::Contains("up to 176") && Catch::Contains("h_scale"));
  json whole = doc;
  whole["bucket_defaults"]["x_scale"] = "row";
  whole["bucket_defaults"]["h_scale"] = "static";
  whole["buckets"]["8"]["stage1"] = {{"token_tile", 256}};
  whole["buckets"]["8"]["stage2"] = {{"token_tile", 192}};
  const Config c = parse_config(whole.dump(), "cfg/t.json");
  CHECK(c.bucket(8).stage1.token_tile == 256);
  CHECK(c.bucket(8).stage2.token_tile == 192);
  ConfigError s2 = refusal(whole, "stage2", 208);
  CHECK(s2.json_path == "$.buckets.8.stage2.token_tile");
  CHECK_THAT(s2.expected, Catch::Contains("up to 192") && Catch::Contains("region"));
  whole["buckets"]["8"]["weights"] = "fp8_resident";  // its 16 KB units: fewer stages fit
  ConfigError r1 = rejection(whole);
  CHECK(r1.json_path == "$.buckets.8.stage1.token_tile");
  CHECK_THAT(r1.expected, Catch::Contains("up to 224"));
}

// SwiGLU's family: limit required, alpha (> 0) and up_offset optional (1 and 0); other kinds take
// none of them, and a bad value is named.
TEST_CASE("swiglu takes limit, alpha and up_offset; the bound follows them", "[config][swiglu]") {
  json doc = valid();
  doc["activation"] = {{"kind", "swiglu"}, {"limit", 7.0}};
  Config c = parse_config(doc.dump(), "cfg/t.json");
  CHECK(c.activation.limit == 7.f);
  CHECK(c.activation.alpha == 1.f);
  CHECK(c.activation.up_offset == 0.f);
  CHECK(activation_bound(c.activation) == Approx(7 * 7 / (1 + std::exp(-7.0))).epsilon(2e-6));
  doc["activation"]["alpha"] = 1.702;
  doc["activation"]["up_offset"] = 1.0;
  c = parse_config(doc.dump(), "cfg/t.json");
  CHECK(c.activation.alpha == 1.702f);
  CHECK(c.activation.up_offset == 1.f);
  CHECK(activation_bound(c.activation) == Approx(7 * 8 / (1 + std::exp(-1.702 * 7))).epsilon(2e-6));
  json bad = doc;
  bad["activation"]["alpha"] = 0;
  ConfigError a = rejection(bad);
  CHECK(a.json_path == "$.activation.alpha");
  CHECK_THAT(a.expected, Catch::Contains("> 0"));
  bad = doc;
  bad["activation"]["up_offset"] = "one";
  CHECK(rejection(bad).json_path == "$.activation.up_offset");
  json silu = valid();
  silu["activation"] = {{"kind", "silu"}, {"alpha", 1.702}};
  CHECK(rejection(silu).json_path == "$.activation.alpha");
}

TEST_CASE("the built-in configs load", "[config]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  Config k = load_config("kimi_k3_a8w4");
  CHECK(k.model.experts == 896);
  CHECK(k.model.experts_per_rank == 896);  // world 1's until config_for_world
  CHECK(k.keys_experts_per_rank == 112);   // the table is tuned where a rank holds EP8's share
  CHECK(k.world == 1);
  CHECK(k.model.model_dim == 3584);
  CHECK(k.model.inter_dim == 3072);
  CHECK(k.model.topk == 16);
  CHECK(k.activation.kind == ActivationKind::situv2);
  Config g = load_config("generic_a8w4");
  CHECK(g.model.experts == 32);
  CHECK(g.keys_experts_per_rank == 32);  // no bucket_keys: the model's experts
  CHECK(g.activation.kind == ActivationKind::silu);
  CHECK(g.bucket(1).dispatch.cus == 32);
  for (auto& b : k.buckets) CHECK_FALSE(b.bounds_check);
  // The SiLU models engines serve, each keyed where a rank of EP8 holds its share.
  struct M {
    const char* name;
    int experts, topk, model_dim, inter_dim, keys;
  };
  for (const M& m : {M{"deepseek_v3_a8w4", 256, 8, 7168, 2048, 32}, M{"kimi_k2_a8w4", 384, 8, 7168, 2048, 48},
                     M{"qwen3_235b_a8w4", 128, 8, 4096, 1536, 16}}) {
    INFO(m.name);
    const Config c = load_config(m.name);
    CHECK(c.model.experts == m.experts);
    CHECK(c.model.topk == m.topk);
    CHECK(c.model.model_dim == m.model_dim);
    CHECK(c.model.inter_dim == m.inter_dim);
    CHECK(c.keys_experts_per_rank == m.keys);
    CHECK(c.activation.kind == ActivationKind::silu);
    for (auto& b : c.buckets) CHECK(b.h_scale == HScale::per_block);  // SiLU has no bound for a static h scale
    CHECK(config_for_world(c, 8).model.experts_per_rank == m.keys);
  }
  // gpt-oss: expert biases, its SwiGLU, dims off the 128 grid, keyed on one GPU.
  for (auto [name, experts] : {std::pair{"gpt_oss_120b_a8w4", 128}, std::pair{"gpt_oss_20b_a8w4", 32}}) {
    INFO(name);
    const Config c = load_config(name);
    CHECK(c.model.experts == experts);
    CHECK(c.model.topk == 4);
    CHECK(c.model.model_dim == 2880);
    CHECK(c.model.inter_dim == 2880);
    CHECK(c.model.expert_biases);
    CHECK(c.keys_experts_per_rank == experts);
    CHECK(c.activation.kind == ActivationKind::swiglu);
    CHECK(c.activation.limit == 7.f);
    CHECK(c.activation.alpha == 1.702f);
    CHECK(c.activation.up_offset == 1.f);
  }
  CHECK_FALSE(k.model.expert_biases);  // absent: none
}

TEST_CASE("config errors: model.expert_biases takes true or false", "[config]") {
  json d = valid();
  d["model"]["expert_biases"] = 1;
  ConfigError e = rejection(d);
  CHECK(e.json_path == "$.model.expert_biases");
  CHECK_THAT(e.expected, Catch::Contains("true or false"));
  d["model"]["expert_biases"] = true;
  CHECK(parse_config(d.dump(), "cfg/t.json").model.expert_biases);
}

TEST_CASE("model.shared_experts and shared_expert_scale: read, and refused with what was expected", "[config][shared]") {
  json d = valid();
  CHECK(parse_config(d.dump(), "cfg/t.json").model.shared_experts == 0);  // absent: none
  d["model"]["shared_experts"] = 2;
  Config c = parse_config(d.dump(), "cfg/t.json");
  CHECK(c.model.shared_experts == 2);
  CHECK(c.model.shared_expert_scale == 1.f);
  d["model"]["shared_expert_scale"] = 2.5;
  CHECK(parse_config(d.dump(), "cfg/t.json").model.shared_expert_scale == 2.5f);
  d["model"]["shared_experts"] = 17;
  ConfigError e = rejection(d);
  CHECK(e.json_path == "$.model.shared_experts");
  CHECK_THAT(e.expected, Catch::Contains("[0, 16]"));
  d["model"]["shared_experts"] = 0;  // a scale with nothing to weight
  e = rejection(d);
  CHECK(e.json_path == "$.model.shared_expert_scale");
  CHECK_THAT(e.expected, Catch::Contains("without model.shared_experts > 0"));
  d["model"]["shared_experts"] = 1;
  d["model"]["shared_expert_scale"] = "one";
  e = rejection(d);
  CHECK(e.json_path == "$.model.shared_expert_scale");
  CHECK_THAT(e.expected, Catch::Contains("a finite number"));
  d["model"].erase("shared_expert_scale");
  d["model"]["topk"] = 8, d["model"]["experts"] = 64, d["model"]["shared_experts"] = 16;
  CHECK(parse_config(d.dump(), "cfg/t.json").model.shared_experts == 16);
  d["model"]["topk"] = 60, d["model"]["shared_experts"] = 5;  // 65 rows a token
  e = rejection(d);
  CHECK(e.json_path == "$.model.shared_experts");
  CHECK_THAT(e.expected, Catch::Contains("at most 64 - topk = 4"));
}

TEST_CASE("config errors: unknown field", "[config]") {
  json d = valid();
  d["bucket_defaults"]["stage1"]["bk"] = 32;
  ConfigError e = rejection(d);
  CHECK(e.file == "cfg/t.json");
  CHECK(e.json_path == "$.bucket_defaults.stage1.bk");
  CHECK(e.value == "32");
  CHECK_THAT(e.expected, Catch::Contains("no such field") && Catch::Contains("known fields: token_tile"));
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
  CHECK(e.expected == "a required field");

  // Misspelled: the missing field is reported with the key that is most likely it.
  json typo = valid();
  typo["model"]["model_dmi"] = typo["model"]["model_dim"];
  typo["model"].erase("model_dim");
  ConfigError et = rejection(typo);
  CHECK(et.json_path == "$.model.model_dim");
  CHECK_THAT(et.expected, Catch::Contains("this object has \"model_dmi\", no field here: misspelled?"));

  json b = valid();
  b["bucket_defaults"]["stage2"].erase("token_tile");
  ConfigError eb = rejection(b);
  CHECK(eb.json_path == "$.bucket_defaults.stage2.token_tile");  // no bucket sets it either
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
  f["buckets"]["8"]["bounds_check"] = 1;
  CHECK(rejection(f).json_path == "$.buckets.8.bounds_check");
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
  ConfigError tile = path_of([](json& d) { d["buckets"]["8"]["stage1"]["token_tile"] = 40; });
  CHECK(tile.json_path == "$.buckets.8.stage1.token_tile");
  CHECK(tile.value == "40");
  CHECK_THAT(tile.expected, Catch::Contains("multiple of 16"));
  CHECK(path_of([](json& d) { d["bucket_defaults"]["stage2"]["token_tile"] = 512; }).json_path ==
        "$.bucket_defaults.stage2.token_tile");
  CHECK(path_of([](json& d) { d["bucket_defaults"]["dispatch"]["cus"] = 0; }).json_path ==
        "$.bucket_defaults.dispatch.cus");
  CHECK(path_of([](json& d) { d["activation"]["beta"] = -1.0; }).json_path == "$.activation.beta");
  ConfigError dim = path_of([](json& d) { d["model"]["inter_dim"] = 96; });
  CHECK(dim.json_path == "$.model.inter_dim");
  CHECK_THAT(dim.expected, Catch::Contains("multiple of 64") && Catch::Contains("portable"));
  // Whole MX blocks but not a path's multiple (1440 = 45 x 32): the error says how to run it padded.
  ConfigError blocks = path_of([](json& d) { d["model"]["model_dim"] = 1440; });
  CHECK(blocks.json_path == "$.model.model_dim");
  CHECK_THAT(blocks.expected, Catch::Contains("1440 is whole MX blocks of 32: run the model padded with zeros to "
                                              "1472 (model_dim = 1472 in the config, each expert's weights given "
                                              "zero W1 columns and W2 rows past 1440"));
  CHECK_THAT(dim.expected, Catch::Contains("padded with zeros to 128 (inter_dim = 128 in the config"));
  ConfigError odd = path_of([](json& d) { d["model"]["model_dim"] = 1000; });  // not whole MX blocks
  CHECK_THAT(odd.expected, !Catch::Contains("whole MX blocks"));
  CHECK(path_of([](json& d) { d["activation"]["kind"] = "gelu"; }).json_path == "$.activation.kind");
  CHECK(path_of([](json& d) { d["bucket_defaults"]["combine_wire"] = "fp4"; }).json_path ==
        "$.bucket_defaults.combine_wire");
  // The weights' source: one of two names.
  ConfigError w = path_of([](json& d) { d["buckets"]["8"]["weights"] = "fp8"; });
  CHECK(w.json_path == "$.buckets.8.weights");
  CHECK_THAT(w.expected, Catch::Contains("\"mxfp4\"") && Catch::Contains("\"fp8_resident\""));
  // The scale modes: one of two names each.
  ConfigError xs = path_of([](json& d) { d["buckets"]["8"]["x_scale"] = "token"; });
  CHECK(xs.json_path == "$.buckets.8.x_scale");
  CHECK_THAT(xs.expected, Catch::Contains("\"block\"") && Catch::Contains("\"row\""));
  ConfigError hs = path_of([](json& d) { d["bucket_defaults"]["h_scale"] = 128; });
  CHECK(hs.json_path == "$.bucket_defaults.h_scale");
  CHECK_THAT(hs.expected, Catch::Contains("\"block\"") && Catch::Contains("\"static\""));
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
  CHECK_THROWS_AS(load_config("no_such_config"), ConfigError);
  // The folder set was searched: the message names it and what it holds, not to set it.
  CHECK_THROWS_WITH(load_config("no_such_config"),
                    Catch::Contains("MEGAMOE_CONFIG_DIR=" + dir.path().string() + " searched: it holds kimi_k3_a8w4"));
  CHECK_THROWS_WITH(load_config("no_such_config"), !Catch::Contains("or set MEGAMOE_CONFIG_DIR"));
}

TEST_CASE("MEGAMOE_BOUNDS_CHECK=1 turns the checked build on for every bucket", "[config]") {
  test::ScopedEnv on("MEGAMOE_BOUNDS_CHECK", "1");
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  for (auto& b : load_config("kimi_k3_a8w4").buckets) CHECK(b.bounds_check);
}

TEST_CASE("with_buckets_of gives one config's model the other's bucket table", "[config]") {
  const Config model = parse_config(valid().dump(), "cfg/t.json");
  json other_doc = valid();
  other_doc["name"] = "u";
  other_doc["model"]["inter_dim"] = 384;  // the other's own tiles fit its own model
  other_doc["bucket_defaults"]["stage2"]["token_tile"] = 32;
  other_doc["buckets"]["8"]["dispatch"]["cus"] = 4;
  const Config other = parse_config(other_doc.dump(), "cfg/u.json");

  const Config both = with_buckets_of(model, other);
  CHECK(both.name == "t_with_u_buckets");
  CHECK(both.model.inter_dim == 128);  // the model's shape, activation and formats
  CHECK(both.activation.kind == model.activation.kind);
  for (int i = 0; i < kBucketCount; ++i) {  // every bucket the other's
    CHECK(both.buckets[i].bucket == other.buckets[i].bucket);
    CHECK(both.buckets[i].stage2.token_tile == other.buckets[i].stage2.token_tile);
    CHECK(both.buckets[i].dispatch.cus == other.buckets[i].dispatch.cus);
  }
  CHECK(both.bucket(8).dispatch.cus == 4);
  CHECK(both.bucket(16).stage2.token_tile == 32);
}

TEST_CASE("a field that schema 2 removed is named with what replaced it", "[config]") {
  auto removed = [](auto mutate) {
    json d = valid();
    mutate(d);
    return rejection(d);
  };
  ConfigError bm = removed([](json& d) { d["buckets"]["8"]["stage1"] = {{"bm", 16}}; });
  CHECK(bm.json_path == "$.buckets.8.stage1.bm");
  CHECK_THAT(bm.expected, Catch::Contains("megamoe-config/2") && Catch::Contains("renamed token_tile"));
  ConfigError bn = removed([](json& d) { d["bucket_defaults"]["stage2"]["bn"] = 128; });
  CHECK(bn.json_path == "$.bucket_defaults.stage2.bn");
  CHECK_THAT(bn.expected, Catch::Contains("weight rows") && Catch::Contains("remove the field"));
  ConfigError two = removed([](json& d) { d["buckets"]["8"]["stage2_two_stage_b"] = true; });
  CHECK(two.json_path == "$.buckets.8.stage2_two_stage_b");
  CHECK_THAT(two.expected, Catch::Contains("no kernel read it"));
  ConfigError fused = removed([](json& d) { d["bucket_defaults"]["fused_stages"] = false; });
  CHECK(fused.json_path == "$.bucket_defaults.fused_stages");
  CHECK_THAT(fused.expected, Catch::Contains("both stages"));
  ConfigError wire = removed([](json& d) { d["quant"]["dispatch_wire"] = "fp8_e4m3_1x32"; });
  CHECK(wire.json_path == "$.quant.dispatch_wire");
  CHECK_THAT(wire.expected, Catch::Contains("each kernel path's own"));

  // A version-1 config: its first removed field is named; one that sets none is told the version.
  json v1 = valid();
  v1["schema"] = "megamoe-config/1";
  v1["bucket_defaults"]["stage1"] = {{"bm", 64}, {"bn", 128}};
  CHECK(rejection(v1).json_path == "$.bucket_defaults.stage1.bm");
  json v1_clean = valid();
  v1_clean["schema"] = "megamoe-config/1";
  ConfigError version = rejection(v1_clean);
  CHECK(version.json_path == "$.schema");
  CHECK_THAT(version.expected, Catch::Contains("\"megamoe-config/2\"") && Catch::Contains("token_tile"));
  json v9 = valid();
  v9["schema"] = "megamoe-config/9";
  CHECK(rejection(v9).json_path == "$.schema");
}

TEST_CASE("config errors: model.experts, topk past it, bucket_keys", "[config][world]") {
  json old = valid();
  old["model"].erase("experts");
  old["model"]["experts_per_rank"] = 8;
  const ConfigError e = rejection(old);
  CHECK(e.json_path == "$.model.experts_per_rank");
  CHECK_THAT(e.what(), Catch::Contains("replaced by model.experts"));
  json topk = valid();
  topk["model"]["topk"] = 9;
  CHECK(rejection(topk).json_path == "$.model.topk");
  CHECK_THAT(rejection(topk).what(), Catch::Contains("at most model.experts = 8"));
  json many = valid();
  many["model"]["experts"] = 8193;
  CHECK(rejection(many).json_path == "$.model.experts");
  json keys = valid();
  keys["bucket_keys"] = {{"experts_per_rank", 9}};
  CHECK(rejection(keys).json_path == "$.bucket_keys.experts_per_rank");
  keys["bucket_keys"] = {{"experts_per_rank", 4}, {"world", 2}};
  CHECK(rejection(keys).json_path == "$.bucket_keys.world");
  keys["bucket_keys"] = {{"experts_per_rank", 4}};
  CHECK(parse_config(keys.dump(), "cfg/t.json").keys_experts_per_rank == 4);
}
