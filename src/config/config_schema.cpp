// The config schema: JSON -> megamoe::Config. Every mistake becomes a ConfigError naming the
// file, the JSON path, the value and what was expected. docs/configs.md describes the schema.
#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/path_requirements.hpp"
#include "config/bucket_check.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

using json = nlohmann::json;

constexpr std::string_view kSchema = "megamoe-config/2";
// Version 1 is read only far enough to name the first field it sets that version 2 no longer has.
constexpr std::string_view kSchemaV1 = "megamoe-config/1";
constexpr std::string_view kV2Changes =
    "version 2 renames stage1.bm and stage2.bm to token_tile and drops stage1.bn, stage2.bn, stage2_two_stage_b, "
    "fused_stages and quant.dispatch_wire; docs/configs.md";

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Edits (insert, delete, replace, swap two neighbours) from a to b.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// A JSON object being read at a path; remembers which fields were read so that
// unknown ones can be reported.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string path, const std::string& file)
      : obj_(obj), path_(std::move(path)), file_(file) {
    if (!obj_.is_object()) fail(path_, show(obj_), "an object");
  }

  [[noreturn]] void fail(const std::string& path, const std::string& value,
                         const std::string& expected) const {
    throw ConfigError(file_, path, value, expected);
  }
  std::string at(std::string_view key) const { return fmt::format("{}.{}", path_, key); }
  const std::string& path() const { return path_; }
  bool has(std::string_view key) const { return obj_.contains(std::string(key)); }

  const json& field(std::string_view key) {
    read_.insert(std::string(key));
    auto it = obj_.find(std::string(key));
    if (it == obj_.end()) {
      // A key here that is one or two edits from the missing one is most likely it, misspelled.
      std::string near;
      for (auto& [k, v] : obj_.items())
        if (!read_.count(k) && !optional_.count(k) && edit_distance(k, key) <= 2)
          near += fmt::format("{}\"{}\"", near.empty() ? "" : ", ", k);
      fail(at(key), "(missing)",
           near.empty() ? std::string("a required field")
                        : fmt::format("a required field; this object has {}, no field here: misspelled?", near));
    }
    return *it;
  }

  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi) {
    const json& v = field(key);
    if (!v.is_number_integer()) fail(at(key), show(v), fmt::format("an integer in [{}, {}]", lo, hi));
    std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi) fail(at(key), show(v), fmt::format("an integer in [{}, {}]", lo, hi));
    return x;
  }
  double positive_number(std::string_view key) {
    const json& v = field(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      fail(at(key), show(v), "a finite number > 0");
    return v.get<double>();
  }
  double finite_number(std::string_view key) {
    const json& v = field(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(at(key), show(v), "a finite number");
    return v.get<double>();
  }
  bool boolean(std::string_view key) {
    const json& v = field(key);
    if (!v.is_boolean()) fail(at(key), show(v), "true or false");
    return v.get<bool>();
  }
  std::string one_of(std::string_view key, std::initializer_list<std::string_view> allowed) {
    const json& v = field(key);
    std::string list;
    for (auto a : allowed) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", a);
    if (!v.is_string()) fail(at(key), show(v), "one of " + list);
    std::string s = v.get<std::string>();
    for (auto a : allowed)
      if (s == a) return s;
    fail(at(key), show(v), "one of " + list);
  }
  ObjectReader object(std::string_view key) { return ObjectReader(field(key), at(key), file_); }

  // Fields this object may also hold when absent (optional ones), for the list of known fields.
  void also_known(std::initializer_list<const char*> names) {
    for (auto n : names) optional_.insert(n);
  }
  // Fields an earlier schema had here, with what became of them: one present is named with its
  // fate at once, before a field that replaced it is missed.
  void removed(std::initializer_list<std::pair<const char*, const char*>> fields) const {
    for (auto [name, fate] : fields)
      if (has(name)) fail(at(name), show(obj_.at(name)), fmt::format("no such field in {}: {}", kSchema, fate));
  }

  // Every field present must have been read.
  void no_unknown_fields() const {
    for (auto& [k, v] : obj_.items())
      if (!read_.count(k)) {
        std::set<std::string> all = read_;
        all.insert(optional_.begin(), optional_.end());
        std::string known;
        for (auto& r : all) known += (known.empty() ? "" : ", ") + r;
        fail(at(k), show(v), fmt::format("no such field here (known fields: {})", known));
      }
  }

 private:
  const json& obj_;
  std::string path_;
  const std::string& file_;
  std::set<std::string> read_, optional_;
};

ModelShape read_model(ObjectReader r) {
  ModelShape m;
  r.removed({{"experts_per_rank", "replaced by model.experts, the model's experts over every rank (a rank holds "
                                   "experts / world; docs/configs.md)"}});
  m.experts = int(r.integer("experts", 1, kMaxGlobalExperts));
  m.experts_per_rank = m.logical_experts = m.experts;  // world 1's, until config_for_world
  m.model_dim = int(r.integer("model_dim", 64, 1 << 16));
  m.inter_dim = int(r.integer("inter_dim", 64, 1 << 16));
  m.topk = int(r.integer("topk", 1, kMaxSlotsPerToken));
  if (r.has("expert_biases")) m.expert_biases = r.boolean("expert_biases");
  r.also_known({"expert_biases", "shared_experts", "shared_expert_scale"});
  if (r.has("shared_experts")) m.shared_experts = int(r.integer("shared_experts", 0, kMaxSharedExperts));
  if (r.has("shared_expert_scale")) {
    m.shared_expert_scale = float(r.finite_number("shared_expert_scale"));
    if (m.shared_experts == 0)
      r.fail(r.at("shared_expert_scale"), std::to_string(m.shared_expert_scale),
             "no field here without model.shared_experts > 0 (it weights the shared experts' outputs)");
  }
  r.no_unknown_fields();
  if (m.topk > m.experts)
    r.fail(r.at("topk"), std::to_string(m.topk), fmt::format("at most model.experts = {}", m.experts));
  if (m.topk + m.shared_experts > kMaxSlotsPerToken)
    r.fail(r.at("shared_experts"), std::to_string(m.shared_experts),
           fmt::format("at most {} - topk = {} (a token's routed and shared rows together)", int(kMaxSlotsPerToken),
                       kMaxSlotsPerToken - m.topk));
  // The least of the paths' multiples (config/path_requirements.hpp): every config runs on one.
  const PathRequirements& least = least_requirements();
  for (auto [key, v] : {std::pair{"model_dim", m.model_dim}, std::pair{"inter_dim", m.inter_dim}})
    if (v % least.dim_multiple) {
      const int up = (v + least.dim_multiple - 1) / least.dim_multiple * least.dim_multiple;
      // Whole MX blocks: zeros past the model's dim add nothing, so the model padded to `up` is the model.
      const std::string forward =
          v % 32 == 0 ? fmt::format("; {} is whole MX blocks of 32: run the model padded with zeros to {} ({} = {} in "
                                    "the config, each expert's weights given zero {} past {}, x given zero columns "
                                    "past it and y's columns past it dropped: the zeros add nothing to any output)",
                                    v, up, key, up,
                                    std::string_view(key) == "model_dim" ? "W1 columns and W2 rows" : "W1 rows (gate and up) and W2 columns",
                                    v)
                      : "";
      r.fail(r.at(key), std::to_string(v),
             fmt::format("a multiple of {} (the {} path's: {}){}", least.dim_multiple, to_string(least.path),
                         least.dim_reason, forward));
    }
  return m;
}

Activation read_activation(ObjectReader r) {
  Activation a;
  std::string kind = r.one_of("kind", {"silu", "situv2", "swiglu"});
  if (kind == "silu") {
    a.kind = ActivationKind::silu;
  } else if (kind == "situv2") {
    a.kind = ActivationKind::situv2;
    a.beta = float(r.positive_number("beta"));
    a.linear_beta = float(r.positive_number("linear_beta"));
  } else {
    a.kind = ActivationKind::swiglu;
    a.limit = float(r.positive_number("limit"));
    if (r.has("alpha")) a.alpha = float(r.positive_number("alpha"));
    if (r.has("up_offset")) a.up_offset = float(r.finite_number("up_offset"));
  }
  r.no_unknown_fields();
  return a;
}

QuantFormats read_quant(ObjectReader r) {
  QuantFormats q;
  r.removed({{"dispatch_wire",
              "the dispatch wire is each kernel path's own (fp8 e4m3 with the path's x scale blocks, docs/layer.md); "
              "remove the field"}});
  q.activations = r.one_of("activations", {"fp8_e4m3"});
  q.weights = r.one_of("weights", {"mxfp4"});
  r.no_unknown_fields();
  return q;
}

// Bucket entries: `bucket_defaults` and each `buckets.N` may set any subset of the fields;
// a bucket's values are the defaults with its own entry merged over them.
void check_tile(ObjectReader r) {
  r.also_known({"token_tile", "weight_tile"});
  r.removed({{"bm", "renamed token_tile (the tokens a block takes at once)"},
             {"bn", "the tile along the weight rows is each kernel path's own (128 rows on the tensor-core and Hopper "
                    "paths, 64 on the portable one); remove the field"}});
  if (r.has("token_tile")) {
    std::int64_t v = r.integer("token_tile", 16, 256);
    if (v % 16) r.fail(r.at("token_tile"), std::to_string(v), "a multiple of 16 in [16, 256]");
  }
  if (r.has("weight_tile")) {
    std::int64_t v = r.integer("weight_tile", 128, 256);
    if (v != 128 && v != 256) r.fail(r.at("weight_tile"), std::to_string(v), "128 or 256");
  }
  r.no_unknown_fields();
}

void check_dispatch(ObjectReader r) {
  r.also_known({"cus", "persistent", "stride"});
  if (r.has("cus")) r.integer("cus", 1, 1024);
  if (r.has("persistent")) r.boolean("persistent");
  if (r.has("stride")) r.integer("stride", 1, 4096);
  r.no_unknown_fields();
}

// Checks the fields present in a (partial) bucket entry.
void check_bucket_entry(ObjectReader r) {
  r.also_known({"stage1", "stage2", "dispatch", "combine_wire", "weights", "x_scale", "h_scale", "bounds_check"});
  r.removed({{"stage2_two_stage_b", "no kernel read it; remove the field"},
             {"fused_stages", "the kernel running both stages at once was no faster and is gone; remove the field"}});
  if (r.has("stage1")) check_tile(r.object("stage1"));
  if (r.has("stage2")) check_tile(r.object("stage2"));
  if (r.has("dispatch")) check_dispatch(r.object("dispatch"));
  if (r.has("combine_wire")) r.one_of("combine_wire", {"bf16", "fp8_blockwise_1x32"});
  if (r.has("weights")) r.one_of("weights", {"mxfp4", "fp8_resident"});
  if (r.has("x_scale")) r.one_of("x_scale", {"block", "row"});
  if (r.has("h_scale")) r.one_of("h_scale", {"block", "static"});
  if (r.has("bounds_check")) r.boolean("bounds_check");
  r.no_unknown_fields();
}

// Reads a merged, already checked bucket entry; a field missing from both places is reported
// at the bucket's own path.
BucketConfig read_merged_bucket(const json& merged, int bucket, const std::string& path,
                                const std::string& defaults_path, const std::string& file) {
  auto missing = [&](const std::string& what) -> ConfigError {
    return ConfigError(file, path + "." + what, "(missing)", "a required field, set here or in " + defaults_path);
  };
  auto get = [&](const json& obj, const char* key, const std::string& sub) -> const json& {
    if (!obj.contains(key)) throw missing(sub.empty() ? key : sub + "." + key);
    return obj.at(key);
  };
  auto tile = [&](const char* stage) {
    if (!merged.contains(stage)) throw missing(stage);
    const json& t = merged.at(stage);
    return TileShape{get(t, "token_tile", stage).get<int>(), t.value("weight_tile", 128)};  // weight_tile optional
  };
  BucketConfig b;
  b.bucket = bucket;
  b.stage1 = tile("stage1");
  b.stage2 = tile("stage2");
  if (!merged.contains("dispatch")) throw missing("dispatch");
  const json& d = merged.at("dispatch");
  b.dispatch = {get(d, "cus", "dispatch").get<int>(), get(d, "persistent", "dispatch").get<bool>(),
                get(d, "stride", "dispatch").get<int>()};
  b.combine_wire = get(merged, "combine_wire", "").get<std::string>() == "bf16"
                       ? CombineWire::bf16
                       : CombineWire::fp8_blockwise_1x32;
  b.weights = merged.value("weights", "mxfp4") == "mxfp4" ? WeightSource::mxfp4 : WeightSource::fp8_resident;  // optional
  b.x_scale = merged.value("x_scale", "block") == "block" ? XScale::per_block : XScale::per_row;        // optional
  b.h_scale = merged.value("h_scale", "block") == "block" ? HScale::per_block : HScale::static_bound;   // optional
  b.bounds_check = get(merged, "bounds_check", "").get<bool>();
  return b;
}

// A stage's tiles as the Hopper kernels take them. A 256-row weight tile (four consumer
// warpgroups) only where its stage sums with no promotion (the registers of a promotion's partial
// sums are not there), from MXFP4 weights (a stage of two 16 KB fp8-resident units leaves too few
// stages), and on a stage whose weight rows it divides. A token tile up to hopper_max_bm of the
// stage's form (interface/kernel_constants.cuh): the registers (176 promoting, 256 not, 96 over
// 256 rows) and kHopperMinStages stages beside the region.
void check_tiles(const BucketConfig& b, const ModelShape& m, const std::string& path, const std::string& file) {
  for (int stage : {1, 2}) {
    const TileShape& t = stage == 1 ? b.stage1 : b.stage2;
    const bool promotes = stage_promotes(b, stage);
    const bool resident = b.weights == WeightSource::fp8_resident;
    if (t.weight_tile != 128) {
      const std::string at = fmt::format("{}.stage{}.weight_tile", path, stage);
      const std::string value = std::to_string(t.weight_tile);
      if (promotes)
        throw ConfigError(file, at, value,
                          stage == 1 ? "128 (256 weight rows need Stage1 unpromoted: x_scale \"row\")"
                                     : "128 (256 weight rows need Stage2 unpromoted: h_scale \"static\")");
      if (resident) throw ConfigError(file, at, value, "128 (the fp8-resident weights take 128-row tiles)");
      if (t.token_tile > kHopperMaxBmWide)
        throw ConfigError(file, at, value,
                          fmt::format("128, or a stage{}.token_tile of at most {} (this bucket's is {})", stage,
                                      int(kHopperMaxBmWide), t.token_tile));
      const ModelShape hopper = padded_model(KernelPath::hopper, m);  // the shape the Hopper kernels run
      const int rows = stage == 1 ? 2 * hopper.inter_dim : hopper.model_dim;
      if (rows % t.weight_tile)
        throw ConfigError(file, at, value,
                          fmt::format("128: Stage{}'s {} weight rows ({}, with the dims padded to multiples of 128) "
                                      "are no multiple of {}",
                                      stage, rows, stage == 1 ? "2 x inter_dim" : "model_dim", t.weight_tile));
    }
    const int limit = hopper_max_bm(stage, promotes, resident, t.weight_tile / kWeightRowsPerBlock);
    if (t.token_tile > limit) {
      const char* why = promotes ? (stage == 1 ? " (Stage1 promotes with x_scale \"block\"; \"row\" allows up to 256)"
                                               : " (Stage2 promotes with h_scale \"block\"; \"static\" allows more)")
                        : stage == 2 ? " (Stage2's output region leaves too few pipeline stages past it)"
                                     : " (the pipeline stages' shared memory)";
      throw ConfigError(file, fmt::format("{}.stage{}.token_tile", path, stage), std::to_string(t.token_tile),
                        fmt::format("a multiple of 16 up to {} here{}", limit, why));
    }
  }
}

}  // namespace

void check_bucket(const Config& c, const BucketConfig& b, const std::string& path, const std::string& file) {
  if (b.h_scale == HScale::static_bound && !std::isfinite(activation_bound(c.activation)))
    throw ConfigError(file, path + ".h_scale", "\"static\"",
                      fmt::format("\"block\": a static h scale needs a bounded activation, and {} has no bound",
                                  to_string(c.activation.kind)));
  check_tiles(b, c.model, path, file);
}

namespace {

// A card's name as the CUDA driver gives it (cuDeviceGetName): matched exactly, so printable and
// without spaces at its ends.
std::string card_name(const json& v, const std::string& path, const std::string& file) {
  const std::string expected = "a GPU's name as the driver gives it (\"NVIDIA H200\"), without spaces at its ends";
  if (!v.is_string()) throw ConfigError(file, path, show(v), expected);
  const std::string s = v.get<std::string>();
  const bool printable = std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f; });
  if (s.empty() || !printable || s.front() == ' ' || s.back() == ' ' || s == "default")
    throw ConfigError(file, path, show(v), expected + (s == "default" ? " (\"default\" names the default table)" : ""));
  return s;
}

// One bucket table: `holder`'s bucket_defaults with each of its buckets' entries merged over them.
BucketTable read_table(const Config& c, ObjectReader& holder, const std::string& at, const std::string& source) {
  const std::string defaults_path = at + ".bucket_defaults";
  const json& defaults = holder.field("bucket_defaults");
  check_bucket_entry(ObjectReader(defaults, defaults_path, source));
  const json& overrides = holder.field("buckets");
  ObjectReader over(overrides, at + ".buckets", source);
  for (auto& [key, value] : overrides.items()) {
    std::string path = over.at(key);
    std::size_t used = 0;
    long long n = -1;
    try {
      n = std::stoll(key, &used);
    } catch (...) {
    }
    if (used != key.size() || n < kMinBucket || n > kMaxBucket || !is_power_of_two(n) ||
        std::to_string(n) != key)
      throw ConfigError(source, path, "\"" + key + "\"",
                        fmt::format("a bucket key: a power of two from {} to {}", kMinBucket, kMaxBucket));
    check_bucket_entry(ObjectReader(value, path, source));
  }
  BucketTable t;
  for (int i = 0; i < kBucketCount; ++i) {
    int bucket = 1 << i;
    json merged = defaults;
    std::string path = defaults_path;
    if (auto it = overrides.find(std::to_string(bucket)); it != overrides.end()) {
      merged.merge_patch(*it);
      path = at + ".buckets." + std::to_string(bucket);
    }
    t.buckets[i] = read_merged_bucket(merged, bucket, path, defaults_path, source);
    check_bucket(c, t.buckets[i], path, source);
  }
  return t;
}

}  // namespace

Config parse_config(std::string_view json_text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw ConfigError(source, "$", "(not JSON)", fmt::format("valid JSON ({})", e.what()));
  }
  ObjectReader top(doc, "$", source);
  Config c;
  c.source = source;
  top.also_known({"description", "bucket_keys", "card", "card_tables"});
  const json& schema = top.field("schema");
  const bool v1 = schema == kSchemaV1;
  if (!v1 && schema != kSchema) top.fail("$.schema", show(schema), fmt::format("\"{}\"", kSchema));
  const json& name = top.field("name");
  if (!name.is_string() || name.get<std::string>().empty() ||
      name.get<std::string>().find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    top.fail("$.name", show(name), "a non-empty string of [a-z0-9_]");
  c.name = name.get<std::string>();
  if (top.has("description") && !top.field("description").is_string())
    top.fail("$.description", show(doc["description"]), "a string");
  c.model = read_model(top.object("model"));
  c.activation = read_activation(top.object("activation"));
  c.quant = read_quant(top.object("quant"));
  c.keys_experts_per_rank = c.model.experts;
  if (top.has("bucket_keys")) {
    ObjectReader keys = top.object("bucket_keys");
    c.keys_experts_per_rank = int(keys.integer("experts_per_rank", 1, std::min(c.model.experts, kMaxExpertsPerRank)));
    keys.no_unknown_fields();
  }

  c.tables.push_back(read_table(c, top, "$", source));
  if (top.has("card")) c.tables[0].card = card_name(top.field("card"), "$.card", source);
  if (top.has("card_tables")) {
    top.object("card_tables");  // an object
    for (auto& [card, value] : top.field("card_tables").items()) {
      const std::string path = fmt::format("$.card_tables[{}]", json(card).dump());
      card_name(json(card), path, source);
      for (const BucketTable& t : c.tables)
        if (t.card == card)
          throw ConfigError(source, path, json(card).dump(), "a card without a table of its own ($.card names the "
                                                             "default table's card: one table a card)");
      ObjectReader entry(value, path, source);
      c.tables.push_back(read_table(c, entry, path, source));
      c.tables.back().card = card;
      entry.no_unknown_fields();
    }
  }
  top.no_unknown_fields();
  c.buckets = c.tables[0].buckets;
  c.table = c.tables[0].card;
  if (v1) top.fail("$.schema", fmt::format("\"{}\"", kSchemaV1), fmt::format("\"{}\" ({})", kSchema, kV2Changes));
  return c;
}

Config with_buckets_of(const Config& model, const Config& buckets) {
  if (!std::isfinite(activation_bound(model.activation)))
    for (const BucketConfig& b : buckets.buckets)
      if (b.h_scale == HScale::static_bound)
        throw Error(fmt::format("megamoe: config {}'s bucket {} takes a static h scale, which {}'s activation ({}) has no "
                                "bound for: its table cannot serve that model",
                                buckets.name, b.bucket, model.name, to_string(model.activation.kind)));
  for (const BucketConfig& b : buckets.buckets)  // its weight tiles must divide this model's weight rows
    check_tiles(b, model.model, fmt::format("$.buckets.{}", b.bucket), buckets.source);
  Config c = model;
  c.name = model.name + "_with_" + buckets.name + "_buckets";
  c.source = model.source + " with the buckets of " + buckets.source;
  c.buckets = buckets.buckets;
  c.table = buckets.table;
  c.tables = {{buckets.table, buckets.buckets}};  // the table in use alone: the other's others were not checked here
  c.keys_experts_per_rank = buckets.keys_experts_per_rank;
  return c;
}

}  // namespace megamoe
