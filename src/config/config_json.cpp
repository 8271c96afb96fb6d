#include "config/config_json.hpp"

#include <map>
#include <vector>

#include <fmt/format.h>

#include "config/bucket_tables.hpp"

namespace megamoe {

using json = nlohmann::ordered_json;

namespace {

// A float as its shortest text that reads back to the same float (1.702, not 1.7020000219...; 4.0).
json short_number(float v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // a number, not an integer
  return json::parse(s);
}

json activation_json(const Activation& a) {
  json j = {{"kind", std::string(to_string(a.kind))}};
  if (a.kind == ActivationKind::situv2) j["beta"] = short_number(a.beta), j["linear_beta"] = short_number(a.linear_beta);
  if (a.kind == ActivationKind::swiglu) {
    j["limit"] = short_number(a.limit);
    if (a.alpha != 1.f) j["alpha"] = short_number(a.alpha);
    if (a.up_offset != 0.f) j["up_offset"] = short_number(a.up_offset);
  }
  return j;
}

// `v` on one line with a space after each comma and colon (as the built-in configs are written).
std::string one_line(const json& v) {
  if (v.is_object()) {
    std::string out;
    for (auto& [k, x] : v.items()) out += fmt::format("{}{}: {}", out.empty() ? "{" : ", ", json(k).dump(), one_line(x));
    return out.empty() ? "{}" : out + "}";
  }
  if (v.is_array()) {
    std::string out;
    for (const json& x : v) out += (out.empty() ? "[" : ", ") + one_line(x);
    return out.empty() ? "[]" : out + "]";
  }
  return v.dump();
}

// The fields of `entry` that differ from `base`, as a merge patch over it.
json difference(const json& entry, const json& base) {
  json d = json::object();
  for (auto& [key, value] : entry.items()) {
    auto it = base.find(key);
    if (it != base.end() && *it == value) continue;
    d[key] = value.is_object() && it != base.end() && it->is_object() ? difference(value, *it) : value;
  }
  return d;
}

}  // namespace

json entry_json(const BucketConfig& b) {
  return {{"stage1", {{"token_tile", b.stage1.token_tile}, {"weight_tile", b.stage1.weight_tile}}},
          {"stage2", {{"token_tile", b.stage2.token_tile}, {"weight_tile", b.stage2.weight_tile}}},
          {"dispatch", {{"cus", b.dispatch.cus}, {"persistent", b.dispatch.persistent}, {"stride", b.dispatch.stride}}},
          {"combine_wire", std::string(to_string(b.combine_wire))},
          {"weights", std::string(to_string(b.weights))},
          {"x_scale", std::string(to_string(b.x_scale))},
          {"h_scale", std::string(to_string(b.h_scale))},
          {"bounds_check", b.bounds_check}};
}

std::string entry_text(const BucketConfig& b) { return entry_json(b).dump(); }

namespace {

// One table as bucket_defaults (its most common entry, the smallest bucket's among equals) and
// each bucket's differences from it.
std::pair<json, json> table_json(const std::array<BucketConfig, kBucketCount>& table) {
  std::map<std::string, int> count;
  for (const BucketConfig& b : table) ++count[entry_text(b)];
  const BucketConfig* common = &table[0];
  for (const BucketConfig& b : table)
    if (count[entry_text(b)] > count[entry_text(*common)]) common = &b;
  const json defaults = entry_json(*common);
  json buckets = json::object();
  for (const BucketConfig& b : table) {
    json d = difference(entry_json(b), defaults);
    if (!d.empty()) buckets[std::to_string(b.bucket)] = d;
  }
  return {defaults, buckets};
}

// A bucket_defaults or buckets object: a line a field, `indent` spaces in.
std::string entries_text(const json& value, int indent) {
  if (value.empty()) return "{}";
  std::size_t width = 0;
  for (auto& [k, v] : value.items()) width = std::max(width, json(k).dump().size() + 1);
  const std::string pad(std::size_t(indent) + 2, ' ');
  std::string s = "{\n";
  std::size_t n = 0;
  for (auto& [k, v] : value.items())
    s += fmt::format("{}{:<{}} {}{}", pad, json(k).dump() + ":", width, one_line(v), ++n < value.size() ? ",\n" : "\n");
  return s + std::string(std::size_t(indent), ' ') + "}";
}

}  // namespace

json config_json(const Config& c, const std::string& name, const std::string& description) {
  std::vector<BucketTable> tables = tables_of(c);
  for (BucketTable& t : tables)  // the table in use as it stands (edited or not)
    if (t.card == c.table) t.buckets = c.buckets;
  json model = {{"experts", c.model.experts},
                {"model_dim", c.model.model_dim},
                {"inter_dim", c.model.inter_dim},
                {"topk", c.model.topk}};
  if (c.model.expert_biases) model["expert_biases"] = true;
  json j = {{"schema", "megamoe-config/2"}, {"name", name}, {"description", description}, {"model", model}};
  if (c.keys_experts_per_rank != c.model.experts) j["bucket_keys"] = {{"experts_per_rank", c.keys_experts_per_rank}};
  j["activation"] = activation_json(c.activation);
  j["quant"] = {{"activations", c.quant.activations}, {"weights", c.quant.weights}};
  if (!tables[0].card.empty()) j["card"] = tables[0].card;
  auto [defaults, buckets] = table_json(tables[0].buckets);
  j["bucket_defaults"] = defaults;  // one at a time: an ordered_json's members move as it grows
  j["buckets"] = buckets;
  for (std::size_t i = 1; i < tables.size(); ++i) {
    auto [card_defaults, card_buckets] = table_json(tables[i].buckets);
    j["card_tables"][tables[i].card] = {{"bucket_defaults", card_defaults}, {"buckets", card_buckets}};
  }
  return j;
}

std::string config_text(const json& config) {
  std::string s = "{\n";
  std::size_t i = 0;
  for (auto& [key, value] : config.items()) {
    const std::string end = ++i < config.size() ? ",\n" : "\n";
    if (key == "bucket_defaults" || key == "buckets") {
      s += fmt::format("  {}: {}{}", json(key).dump(), entries_text(value, 2), end);
    } else if (key == "card_tables" && value.is_object()) {
      s += fmt::format("  {}: {{\n", json(key).dump());
      std::size_t n = 0;
      for (auto& [card, table] : value.items()) {
        s += fmt::format("    {}: {{\n", json(card).dump());
        std::size_t m = 0;
        for (auto& [k, v] : table.items())
          s += fmt::format("      {}: {}{}", json(k).dump(), entries_text(v, 6), ++m < table.size() ? ",\n" : "\n");
        s += fmt::format("    }}{}", ++n < value.size() ? ",\n" : "\n");
      }
      s += "  }" + end;
    } else {
      s += fmt::format("  {}: {}{}", json(key).dump(), one_line(value), end);
    }
  }
  return s + "}\n";
}

BucketConfig entry_from_text(const Config& config, int bucket, const std::string& text) {
  json j = config_json(config, "entry", "");
  j["bucket_defaults"] = json::parse(text);
  j["buckets"] = json::object();
  j.erase("card_tables");
  return parse_config(j.dump(), "(an entry of the tuner's journal)").bucket(bucket);
}

}  // namespace megamoe
