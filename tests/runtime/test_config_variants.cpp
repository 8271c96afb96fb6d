#include "runtime/test_config_variants.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "common/embedded_files.hpp"
#include "support/test_support.hpp"
#include "tune/tactic_space.hpp"
#include "config/config_json.hpp"

namespace megamoe::test {

namespace {
// Kimi-K3's built-in table in other modes at every bucket (and, where given, another weight
// source), each stage's tiles narrowed to what its form allows as megamoe-tune narrows them (a
// 256-row weight tile where the stage now promotes becomes 128; a token tile past the form's
// widest becomes the widest); `extra` set over the patch's top level (its nulls kept).
std::string kimi_in_form(XScale x, HScale h, CombineWire wire, std::optional<WeightSource> weights = std::nullopt,
                         const nlohmann::json& extra = nlohmann::json::object()) {
  const Config kimi = load_config("kimi_k3_a8w4");
  nlohmann::json patch = {{"buckets", nlohmann::json::object()}};
  for (BucketConfig b : kimi.buckets) {
    b = tune::with_modes(kimi, b, {x, h, wire});
    if (weights) b = tune::with_weights(kimi, b, *weights);
    patch["buckets"][std::to_string(b.bucket)] = nlohmann::json::parse(entry_text(b));
  }
  for (auto& [key, value] : extra.items()) patch[key] = value;
  return patch.dump();
}
constexpr auto kRow = XScale::per_row, kXBlock = XScale::per_block;
constexpr auto kStatic = HScale::static_bound, kHBlock = HScale::per_block;
constexpr auto kBf16 = CombineWire::bf16;

// Kimi-K3's buckets with token tiles of at most 96 (kHopperMaxBmWide) and the scale modes of no
// promotion, over 256 weight rows a block or 128; `extra` merged over them.
std::string kimi_wide(int weight_tile, const nlohmann::json& extra = nlohmann::json::object()) {
  const int tiles[] = {16, 16, 16, 16, 16, 16, 16, 32, 48, 96, 80, 96, 96, 96, 96, 96};
  nlohmann::json patch = {{"bucket_defaults", {{"x_scale", "row"}, {"h_scale", "static"}}}};
  for (int i = 0; i < 16; ++i) {
    const nlohmann::json tile = {{"token_tile", tiles[i]}, {"weight_tile", weight_tile}};
    patch["buckets"][std::to_string(1 << i)] = {{"stage1", tile}, {"stage2", tile}, {"weights", "mxfp4"}};
  }
  for (auto& [key, value] : extra.items()) patch[key] = value;  // as it is: its nulls must reach the config's merge
  return patch.dump();
}
const std::string kKimiWide256 = kimi_wide(256), kKimiWide128 = kimi_wide(128);
// Kimi-K3's buckets from 1024 tokens with token tiles past 176 (Stage1 / Stage2: 256 / 192 from
// MXFP4 weights, 224 / 176 from the fp8-resident copy, each form's widest), or 160 / 160 from
// MXFP4; no promotion, as the wide tiles need.
std::string kimi_token_tiles(int stage1, int stage2, const char* weights) {
  nlohmann::json patch = {{"bucket_defaults", {{"x_scale", "row"}, {"h_scale", "static"}}}};
  for (int bucket = 1024; bucket <= 32768; bucket *= 2)
    patch["buckets"][std::to_string(bucket)] = {
        {"stage1", {{"token_tile", stage1}}}, {"stage2", {{"token_tile", stage2}}}, {"weights", weights}};
  return patch.dump();
}
}  // namespace

const std::vector<ConfigVariant>& config_variants() {
  static const std::vector<ConfigVariant> v = {
      {"kimi_silu", "kimi_k3_a8w4",
       kimi_in_form(kRow, kHBlock, kBf16, std::nullopt,
                    nlohmann::json::parse(R"({"activation": {"kind": "silu", "beta": null, "linear_beta": null}})"))},
      {"kimi_swiglu", "kimi_k3_a8w4",
       R"({"activation": {"kind": "swiglu", "limit": 7.0, "beta": null, "linear_beta": null}})"},
      // gpt-oss's SwiGLU (alpha 1.702, up + 1): its bound, 7 x 8, sets the static h scale.
      {"kimi_swiglu_oss", "kimi_k3_a8w4",
       R"({"activation": {"kind": "swiglu", "limit": 7.0, "alpha": 1.702, "up_offset": 1.0, "beta": null,
                          "linear_beta": null}})"},
      {"kimi_fp8wire", "kimi_k3_a8w4", R"({"bucket_defaults": {"combine_wire": "fp8_blockwise_1x32"}})"},
      {"kimi_checked", "kimi_k3_a8w4", R"({"bucket_defaults": {"bounds_check": true}})"},
      // Each scale mode at every bucket (docs/layer.md, "Scale modes"), whatever the built-in
      // table takes.
      // A stage that promotes takes 128 weight rows and token tiles of at most 176 (kimi_in_form).
      {"kimi_x_block_h_block", "kimi_k3_a8w4", kimi_in_form(kXBlock, kHBlock, kBf16)},
      {"kimi_x_row_h_block", "kimi_k3_a8w4", kimi_in_form(kRow, kHBlock, kBf16)},
      {"kimi_x_block_h_static", "kimi_k3_a8w4", kimi_in_form(kXBlock, kStatic, kBf16)},
      {"kimi_x_row_h_static", "kimi_k3_a8w4", kimi_in_form(kRow, kStatic, kBf16)},
      {"kimi_fp8res_x_row_h_static", "kimi_k3_a8w4", kimi_in_form(kRow, kStatic, kBf16, WeightSource::fp8_resident)},
      // No promotion over odd chunk counts (K / 128 = 3 and 5), both weight sources.
      {"small_odd_x_row_h_static", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 384, "inter_dim": 640, "topk": 4},
           "activation": {"kind": "situv2", "beta": 4.0, "linear_beta": 25.0},
           "bucket_defaults": {"x_scale": "row", "h_scale": "static"},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      {"small_odd_fp8res_x_row_h_static", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 384, "inter_dim": 640, "topk": 4},
           "activation": {"kind": "situv2", "beta": 4.0, "linear_beta": 25.0},
           "bucket_defaults": {"weights": "fp8_resident", "x_scale": "row", "h_scale": "static",
                               "stage1": {"weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      // Odd chunk counts (K / 128 = 3 and 5) for main loops that take chunks in pairs (Stage1's
      // 64-token tiles on Hopper, x per chunk over 128 weight rows).
      {"small_odd_chunks", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 384, "inter_dim": 640, "topk": 4},
           "bucket_defaults": {"x_scale": "block", "stage1": {"weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      // model_dim 768: six chunks, x in blocks of 256 on Hopper, so the dispatch's second group
      // of four chunks holds one block and two chunks past the row.
      {"small_x256_partial", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 768, "inter_dim": 512, "topk": 4},
           "bucket_defaults": {"x_scale": "block", "stage1": {"weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      // 256 weight rows a block (four consumer warpgroups) in both stages at every bucket, token
      // tiles of 16 to 96, and the same token tiles over 128 rows: the two give the same bits.
      {"kimi_w256", "kimi_k3_a8w4", kKimiWide256},
      {"kimi_w256_as_w128", "kimi_k3_a8w4", kKimiWide128},
      // Token tiles past 176 (no promotion) at each weight source's widest, and the same layer at 160.
      {"kimi_wide_tiles", "kimi_k3_a8w4", kimi_token_tiles(256, 192, "mxfp4")},
      {"kimi_wide_tiles_fp8res", "kimi_k3_a8w4", kimi_token_tiles(224, 176, "fp8_resident")},
      {"kimi_wide_as_160", "kimi_k3_a8w4", kimi_token_tiles(160, 160, "mxfp4")},
      // Stage1 over 256 rows with h per 128 (SiLU: a tile holds its blocks of h, no clusters) and
      // over 128 (clusters of two exchanging the rows' maxima); odd chunk counts (K 384, 3 chunks).
      {"small_odd_silu_w256", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 384, "inter_dim": 640, "topk": 4},
           "bucket_defaults": {"x_scale": "row", "stage1": {"token_tile": 48, "weight_tile": 256}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      {"small_odd_silu_w128", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 384, "inter_dim": 640, "topk": 4},
           "bucket_defaults": {"x_scale": "row", "stage1": {"token_tile": 48, "weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      // The fp8-resident kernels: Kimi-K3 at every bucket; x per 128 with odd chunk counts; x per
      // 256 over six chunks.
      {"kimi_fp8res", "kimi_k3_a8w4", kimi_in_form(kRow, kStatic, kBf16, WeightSource::fp8_resident)},
      {"small_odd_fp8res", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 384, "inter_dim": 640, "topk": 4},
           "bucket_defaults": {"weights": "fp8_resident", "x_scale": "block", "stage1": {"weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      {"small_x256_fp8res", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 768, "inter_dim": 512, "topk": 4},
           "bucket_defaults": {"weights": "fp8_resident", "x_scale": "block", "stage1": {"weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      // Expert biases and dims off the 128 grid (320 and 192: the tensor-core and Hopper paths
      // run them padded to 384 and 256, x's last block of 128 half padding), gpt-oss's SwiGLU;
      // each scale mode pair's extremes.
      {"small_padded_biases", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 320, "inter_dim": 192, "topk": 4, "expert_biases": true},
           "activation": {"kind": "swiglu", "limit": 7.0, "alpha": 1.702, "up_offset": 1.0},
           "bucket_defaults": {"x_scale": "block", "h_scale": "block", "stage1": {"weight_tile": 128}},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      {"small_padded_biases_x_row_h_static", "generic_a8w4",
       R"({"model": {"experts": 8, "model_dim": 320, "inter_dim": 192, "topk": 4, "expert_biases": true},
           "activation": {"kind": "swiglu", "limit": 7.0, "alpha": 1.702, "up_offset": 1.0},
           "bucket_defaults": {"x_scale": "row", "h_scale": "static"},
           "buckets": {"1": {"stage1": {"token_tile": 16}, "stage2": {"token_tile": 16}}}})"},
      // Expert biases through every Kimi-K3 bucket's kernels (token tiles, 256 weight rows, the
      // fp8-resident copy), and over 256 weight rows in both stages at every bucket.
      {"kimi_w256_oss_biases", "kimi_k3_a8w4",
       kimi_wide(256, nlohmann::json::parse(R"({"model": {"expert_biases": true},
           "activation": {"kind": "swiglu", "limit": 7.0, "alpha": 1.702, "up_offset": 1.0, "beta": null,
                          "linear_beta": null}})"))},
      {"kimi_swiglu_oss_biases", "kimi_k3_a8w4",
       R"({"model": {"expert_biases": true},
           "activation": {"kind": "swiglu", "limit": 7.0, "alpha": 1.702, "up_offset": 1.0, "beta": null,
                          "linear_beta": null}})"},
  };
  return v;
}

std::string write_config_variant(const std::filesystem::path& dir, const std::string& name) {
  for (const ConfigVariant& v : config_variants()) {
    if (v.name != name) continue;
    for (auto& f : embedded::configs())
      if (f.path == v.base + ".json") {
        nlohmann::json doc = nlohmann::json::parse(f.text);
        // A variant edits the default table: every card runs it (no other card's table is picked).
        doc.erase("card");
        doc.erase("card_tables");
        doc.merge_patch(nlohmann::json::parse(v.json_patch));
        doc["name"] = v.name;
        // Kimi-K3's variants hold one rank's share of EP8 (112 of its 896 experts): the per-rank
        // work at world 1, and over W loopback ranks 112 / W experts a rank.
        if (v.base == "kimi_k3_a8w4") doc["model"]["experts"] = 112;
        const auto path = dir / (v.name + ".json");
        write_text(path, doc.dump(2));
        return path.string();
      }
    throw std::runtime_error("config variant " + name + ": no built-in config " + v.base);
  }
  throw std::runtime_error("no config variant " + name);
}

void write_config_variants(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const ConfigVariant& v : config_variants()) write_config_variant(dir, v.name);
}

}  // namespace megamoe::test
