// The config schema: JSON -> megamoe::Config. Every mistake becomes a ConfigError naming the
// file, the JSON path, the value and what was expected. docs/configs.md describes the schema.
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

using json = nlohmann::json;

constexpr std::string_view kSchema = "megamoe-config/1";

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

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
    if (it == obj_.end()) fail(at(key), "(missing)", "a required field");
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
  m.experts_per_rank = int(r.integer("experts_per_rank", 1, 1024));
  m.model_dim = int(r.integer("model_dim", 64, 1 << 16));
  m.inter_dim = int(r.integer("inter_dim", 64, 1 << 16));
  m.topk = int(r.integer("topk", 1, 64));
  r.no_unknown_fields();
  // Both are a GEMM's K (split into 32-value MX blocks) and a GEMM's N (split into the portable
  // kernels' 64-column tiles).
  if (m.model_dim % 64) r.fail(r.at("model_dim"), std::to_string(m.model_dim), "a multiple of 64");
  if (m.inter_dim % 64) r.fail(r.at("inter_dim"), std::to_string(m.inter_dim), "a multiple of 64");
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
  }
  r.no_unknown_fields();
  return a;
}

QuantFormats read_quant(ObjectReader r) {
  QuantFormats q;
  q.activations = r.one_of("activations", {"fp8_e4m3"});
  q.weights = r.one_of("weights", {"mxfp4"});
  q.dispatch_wire = r.one_of("dispatch_wire", {"fp8_e4m3_1x32"});
  r.no_unknown_fields();
  return q;
}

// Bucket entries: `bucket_defaults` and each `buckets.N` may set any subset of the fields;
// a bucket's values are the defaults with its own entry merged over them.
void check_tile(ObjectReader r) {
  r.also_known({"bm", "bn"});
  for (auto key : {"bm", "bn"}) {
    if (!r.has(key)) continue;
    std::int64_t v = r.integer(key, 16, 256);
    if (v % 16) r.fail(r.at(key), std::to_string(v), "a multiple of 16 in [16, 256]");
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
  r.also_known({"stage1", "stage2", "dispatch", "stage2_two_stage_b", "fused_stages", "combine_wire", "weights",
                "bounds_check"});
  if (r.has("stage1")) check_tile(r.object("stage1"));
  if (r.has("stage2")) check_tile(r.object("stage2"));
  if (r.has("dispatch")) check_dispatch(r.object("dispatch"));
  if (r.has("stage2_two_stage_b")) r.boolean("stage2_two_stage_b");
  if (r.has("fused_stages")) r.boolean("fused_stages");
  if (r.has("combine_wire")) r.one_of("combine_wire", {"bf16", "fp8_blockwise_1x32"});
  if (r.has("weights")) r.one_of("weights", {"mxfp4", "fp8_resident"});
  if (r.has("bounds_check")) r.boolean("bounds_check");
  r.no_unknown_fields();
}

// Reads a merged, already checked bucket entry; a field missing from both places is reported
// at the bucket's own path.
BucketConfig read_merged_bucket(const json& merged, int bucket, const std::string& path,
                                const std::string& file) {
  auto missing = [&](const std::string& what) -> ConfigError {
    return ConfigError(file, path + "." + what, "(missing)",
                       "a required field, set here or in $.bucket_defaults");
  };
  auto get = [&](const json& obj, const char* key, const std::string& sub) -> const json& {
    if (!obj.contains(key)) throw missing(sub.empty() ? key : sub + "." + key);
    return obj.at(key);
  };
  auto tile = [&](const char* stage) {
    if (!merged.contains(stage)) throw missing(stage);
    const json& t = merged.at(stage);
    return TileShape{get(t, "bm", stage).get<int>(), get(t, "bn", stage).get<int>()};
  };
  BucketConfig b;
  b.bucket = bucket;
  b.stage1 = tile("stage1");
  b.stage2 = tile("stage2");
  if (!merged.contains("dispatch")) throw missing("dispatch");
  const json& d = merged.at("dispatch");
  b.dispatch = {get(d, "cus", "dispatch").get<int>(), get(d, "persistent", "dispatch").get<bool>(),
                get(d, "stride", "dispatch").get<int>()};
  b.stage2_two_stage_b = get(merged, "stage2_two_stage_b", "").get<bool>();
  b.fused_stages = merged.value("fused_stages", false);  // optional
  b.combine_wire = get(merged, "combine_wire", "").get<std::string>() == "bf16"
                       ? CombineWire::bf16
                       : CombineWire::fp8_blockwise_1x32;
  b.weights = merged.value("weights", "mxfp4") == "mxfp4" ? WeightSource::mxfp4 : WeightSource::fp8_resident;  // optional
  b.bounds_check = get(merged, "bounds_check", "").get<bool>();
  return b;
}

// Tiles must split the GEMMs' N dimensions evenly (Stage1 N = inter_dim per half,
// Stage2 N = model_dim).
void check_tiles_fit(const BucketConfig& b, const ModelShape& m, const std::string& path,
                     const std::string& file) {
  if (m.inter_dim % b.stage1.bn)
    throw ConfigError(file, path + ".stage1.bn", std::to_string(b.stage1.bn),
                      fmt::format("a divisor of model.inter_dim ({})", m.inter_dim));
  if (m.model_dim % b.stage2.bn)
    throw ConfigError(file, path + ".stage2.bn", std::to_string(b.stage2.bn),
                      fmt::format("a divisor of model.model_dim ({})", m.model_dim));
  if (b.fused_stages && b.stage1.bm != b.stage2.bm)
    throw ConfigError(file, path + ".fused_stages", "true",
                      fmt::format("false where stage1.bm ({}) and stage2.bm ({}) differ: both stages then share one "
                                  "token tile",
                                  b.stage1.bm, b.stage2.bm));
  if (b.fused_stages && b.weights == WeightSource::fp8_resident)
    throw ConfigError(file, path + ".weights", "\"fp8_resident\"",
                      "\"mxfp4\" where fused_stages is true: the fused kernel reads MXFP4 (small batches, where "
                      "the weights' bytes count)");
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
  top.also_known({"description"});
  std::string schema = top.one_of("schema", {kSchema});
  (void)schema;
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

  const json& defaults = top.field("bucket_defaults");
  check_bucket_entry(ObjectReader(defaults, "$.bucket_defaults", source));
  const json& overrides = top.field("buckets");
  ObjectReader over(overrides, "$.buckets", source);
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
  top.no_unknown_fields();

  for (int i = 0; i < kBucketCount; ++i) {
    int bucket = 1 << i;
    json merged = defaults;
    std::string path = "$.bucket_defaults";
    if (auto it = overrides.find(std::to_string(bucket)); it != overrides.end()) {
      merged.merge_patch(*it);
      path = "$.buckets." + std::to_string(bucket);
    }
    c.buckets[i] = read_merged_bucket(merged, bucket, path, source);
    check_tiles_fit(c.buckets[i], c.model, path, source);
  }
  return c;
}

Config with_buckets_of(const Config& model, const Config& buckets) {
  Config c = model;
  c.name = model.name + "_with_" + buckets.name + "_buckets";
  c.source = model.source + " with the buckets of " + buckets.source;
  c.buckets = buckets.buckets;
  for (const BucketConfig& b : c.buckets)
    check_tiles_fit(b, c.model, fmt::format("{}'s bucket {}", buckets.name, b.bucket), c.source);
  return c;
}

}  // namespace megamoe
