// A config's bucket tables, one per card: read, checked, chosen by the GPU's name, written back,
// and precompiled together.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

#include "backend/backend.hpp"
#include "common/embedded_files.hpp"
#include "config/config_json.hpp"
#include "jit/kernel_builder.hpp"
#include "jit/precompile.hpp"
#include "megamoe/megamoe.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {

constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";
constexpr const char* kH200 = "NVIDIA H200";

// Kimi-K3's config with its table named as the H200's and an H100 table whose 1024 and 2048
// buckets read MXFP4 weights with their own tiles.
nlohmann::json two_tables() {
  nlohmann::json j;
  for (const auto& f : embedded::configs())
    if (std::filesystem::path(f.path).stem() == "kimi_k3_a8w4") j = nlohmann::json::parse(f.text);
  j["card"] = kH200;
  j["card_tables"][kH100] = {
      {"bucket_defaults", j["bucket_defaults"]},
      {"buckets",
       {{"1024", {{"stage1", {{"token_tile", 128}}}, {"weights", "mxfp4"}}},
        {"2048", {{"stage1", {{"token_tile", 144}}}, {"stage2", {{"token_tile", 144}}}, {"weights", "mxfp4"}}}}}};
  return j;
}

Config parse(const nlohmann::json& j) { return parse_config(j.dump(), "two_tables.json"); }

std::string error_of(const nlohmann::json& j) {
  try {
    parse(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a config holds a table per card: read with the default in use", "[config][tables]") {
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  const Config c = parse(two_tables());
  REQUIRE(c.tables.size() == 2);
  CHECK(c.tables[0].card == kH200);
  CHECK(c.tables[1].card == kH100);
  CHECK(c.table == kH200);
  CHECK(c.buckets == c.tables[0].buckets);
  CHECK(c.bucket(1024).weights == WeightSource::fp8_resident);
  CHECK(c.tables[1].buckets[10].weights == WeightSource::mxfp4);  // 1024
  CHECK(c.tables[1].buckets[10].stage1.token_tile == 128);
  CHECK(c.tables[1].buckets[0] == c.tables[0].buckets[0]);  // 1: the defaults in both
  // A config with one table naming no card (the built-ins before a card's table): as before.
  const Config generic = load_config("generic_a8w4");
  REQUIRE(generic.tables.size() == 1);
  CHECK(generic.table.empty());
}

TEST_CASE("card tables' mistakes are named with their path", "[config][tables]") {
  nlohmann::json j = two_tables();
  j["card_tables"]["default"] = j["card_tables"][kH100];
  CHECK_THAT(error_of(j), Catch::Contains("$.card_tables[\"default\"]") && Catch::Contains("names the default table"));

  j = two_tables();
  j["card_tables"][kH200] = j["card_tables"][kH100];  // the default's card again
  CHECK_THAT(error_of(j), Catch::Contains("$.card_tables[\"NVIDIA H200\"]") && Catch::Contains("one table a card"));

  j = two_tables();
  j["card_tables"][kH100].erase("bucket_defaults");
  CHECK_THAT(error_of(j), Catch::Contains("$.card_tables[\"NVIDIA H100 80GB HBM3\"].bucket_defaults") &&
                              Catch::Contains("a required field"));

  j = two_tables();
  j["card_tables"][kH100]["buckets"]["1024"]["stage1"]["token_tile"] = 260;
  CHECK_THAT(error_of(j), Catch::Contains("$.card_tables[\"NVIDIA H100 80GB HBM3\"].buckets.1024.stage1.token_tile"));

  j = two_tables();
  j["card_tables"][kH100]["bucket"] = nlohmann::json::object();  // misspelled
  CHECK_THAT(error_of(j), Catch::Contains("no such field here"));

  j = two_tables();
  j["card"] = " NVIDIA H200";
  CHECK_THAT(error_of(j), Catch::Contains("$.card") && Catch::Contains("without spaces at its ends"));

  j = two_tables();
  j["card_tables"] = nlohmann::json::array();
  CHECK_THAT(error_of(j), Catch::Contains("$.card_tables") && Catch::Contains("an object"));
}

TEST_CASE("a runtime's table: its card's own, the one named, else the default with a warning", "[config][tables]") {
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  const Config c = parse(two_tables());

  TableChoice own = choose_table(c, kH100);
  CHECK(own.table == kH100);
  CHECK_FALSE(own.warn);
  CHECK_THAT(own.note, Catch::Contains("NVIDIA H100 80GB HBM3's own"));
  const Config on_h100 = with_chosen_table(c, own);
  CHECK(on_h100.table == kH100);
  CHECK(on_h100.bucket(1024).weights == WeightSource::mxfp4);
  CHECK(on_h100.tables.size() == 1);  // narrowed: a runtime holding it takes it on any card

  const TableChoice h200 = choose_table(c, kH200);
  CHECK(h200.table == kH200);
  CHECK_FALSE(h200.warn);

  const TableChoice other = choose_table(c, "NVIDIA H100 PCIe");
  CHECK(other.table == kH200);
  CHECK(other.warn);
  CHECK_THAT(other.note, Catch::Contains("has none for NVIDIA H100 PCIe") &&
                             Catch::Contains("NVIDIA H200 (the default); NVIDIA H100 80GB HBM3"));

  const TableChoice asked = choose_table(c, kH200, kH100);
  CHECK(asked.table == kH100);
  CHECK(asked.warn);  // tuned on another card than this one
  CHECK_THAT(asked.note, Catch::Contains("RuntimeOptions.bucket_table"));
  CHECK(choose_table(c, kH100, "default").table == kH200);
  CHECK_THROWS_WITH(choose_table(c, kH100, "NVIDIA A100"),
                    Catch::Contains("no bucket table for 'NVIDIA A100'") && Catch::Contains("NVIDIA H200 (the default)"));
  CHECK_THROWS_WITH(with_table(c, "NVIDIA A100"), Catch::Contains("NVIDIA H100 80GB HBM3"));

  // No GPU to name a card (workspace_bytes): the default, said so.
  const TableChoice none = choose_table(c, "");
  CHECK(none.table == kH200);
  CHECK_THAT(none.note, Catch::Contains("no GPU"));

  // A config with one table naming no card: that table, no warning.
  const TableChoice generic = choose_table(load_config("generic_a8w4"), kH100);
  CHECK(generic.table.empty());
  CHECK_FALSE(generic.warn);
}

TEST_CASE("buckets edited in code are kept: no table is picked over them", "[config][tables]") {
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  Config c = parse(two_tables());
  c.buckets[10].stage2.token_tile = 96;
  const TableChoice t = choose_table(c, kH100);
  CHECK(t.edited);
  CHECK(with_chosen_table(c, t).buckets[10].stage2.token_tile == 96);
  CHECK(choose_table(c, kH100, kH200).edited);  // the table it was edited from, named: still kept
  CHECK_THROWS_WITH(choose_table(c, kH100, kH100), Catch::Contains("edited in code") && Catch::Contains("with_table"));
  // Picked first, then edited: the edit lands on the H100's table.
  Config h100 = with_table(parse(two_tables()), kH100);
  h100.buckets[10].stage2.token_tile = 96;
  CHECK(with_chosen_table(h100, choose_table(h100, kH100)).buckets[10].stage2.token_tile == 96);
}

TEST_CASE("a card's table written into a config and read back; a built-in keeps its text", "[config][tables]") {
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  const Config c = parse(two_tables());
  const std::string text = config_text(config_json(c, "two_tables", "two cards"));
  CHECK_THAT(text, Catch::Contains("\n  \"card\": \"NVIDIA H200\",\n") &&
                       Catch::Contains("\n  \"card_tables\": {\n    \"NVIDIA H100 80GB HBM3\": {\n      \"bucket_defaults\": {\n"));
  const Config back = parse_config(text, "two_tables.json");
  REQUIRE(back.tables.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(back.tables[i].card == c.tables[i].card);
    CHECK(back.tables[i].buckets == c.tables[i].buckets);
  }
  // The tuner's step: an H100 table replaced, an A100 one added, each then in use.
  auto table = c.tables[1].buckets;
  table[0].dispatch.cus = 8;
  const Config replaced = with_card_table(c, kH100, table);
  CHECK(replaced.tables.size() == 2);
  CHECK(replaced.tables[1].buckets[0].dispatch.cus == 8);
  CHECK(replaced.table == kH100);
  const Config added = with_card_table(replaced, "NVIDIA A100-SXM4-80GB", table);
  REQUIRE(added.tables.size() == 3);
  CHECK(added.tables[2].card == "NVIDIA A100-SXM4-80GB");
  const Config written = parse_config(config_text(config_json(added, "three", "")), "three.json");
  REQUIRE(written.tables.size() == 3);
  CHECK(written.tables[0].buckets == c.tables[0].buckets);  // the default as it was
  CHECK(with_table(written, "NVIDIA A100-SXM4-80GB").buckets == table);
  CHECK_THROWS_WITH(with_card_table(c, "default", table), Catch::Contains("needs a card's name"));
  // A config that names no card gains a card table beside its default.
  const Config generic = with_card_table(load_config("generic_a8w4"), kH100, table);
  REQUIRE(generic.tables.size() == 2);
  CHECK(generic.tables[0].card.empty());
  CHECK(generic.tables[0].buckets == load_config("generic_a8w4").buckets);
}

TEST_CASE("a cache built ahead holds every table's kernels, a kernel two tables share once", "[config][tables]") {
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  const Config c = parse(two_tables());
  test::TempDir cache;
  KernelBuilder builder(std::shared_ptr<const Compiler>(make_compiler(BackendKind::cuda)), "sm_90a", cache.path());
  auto names = [](const std::vector<PrecompileJob>& jobs) {
    std::set<std::string> s;
    for (const PrecompileJob& j : jobs) s.insert(j.planned.rendered.name);
    return s;
  };
  const std::vector<int> buckets = {512, 1024, 2048};
  const auto h200 = names(plan_precompile(builder, configs_for_tables(c, kH200), buckets, {KernelPath::hopper}, 1));
  const auto h100 = names(plan_precompile(builder, configs_for_tables(c, kH100), buckets, {KernelPath::hopper}, 1));
  const std::vector<PrecompileJob> all = plan_precompile(builder, configs_for_tables(c), buckets, {KernelPath::hopper}, 1);
  std::set<std::string> both = h200;
  both.insert(h100.begin(), h100.end());
  CHECK(names(all) == both);
  CHECK(all.size() == both.size());  // one job a kernel
  CHECK(h100 != h200);
  CHECK(configs_for_tables(c).size() == 2);
  CHECK_THROWS_WITH(configs_for_tables(c, "NVIDIA A100"), Catch::Contains("no bucket table for 'NVIDIA A100'"));
}

TEST_CASE("workspace_bytes and weights_bytes read the table named, else the default", "[config][tables]") {
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  const Config c = with_experts(parse(two_tables()), 112);
  RuntimeOptions o;
  o.max_tokens = 2048;
  o.path = KernelPath::hopper;
  const std::size_t h200 = Runtime::weights_bytes(c, o);  // 1024 and 2048 read the fp8-resident copy
  o.bucket_table = kH100;                                 // neither does: no copy
  const std::size_t h100 = Runtime::weights_bytes(c, o);
  CHECK(h200 > h100);
  o.bucket_table = "NVIDIA A100";
  CHECK_THROWS_WITH(Runtime::weights_bytes(c, o), Catch::Contains("no bucket table for 'NVIDIA A100'"));
}
