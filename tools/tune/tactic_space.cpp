#include "tune/tactic_space.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "config/bucket_check.hpp"
#include "common/kernel_limits.hpp"
#include "megamoe/errors.hpp"

namespace megamoe::tune {

Modes modes_of(const BucketConfig& b) { return {b.x_scale, b.h_scale, b.combine_wire}; }

std::string to_string(const Modes& m) {
  return fmt::format("x {}, h {}, wire {}", megamoe::to_string(m.x), megamoe::to_string(m.h),
                     megamoe::to_string(m.wire));
}

Modes parse_modes(const std::string& text, const Modes& base) {
  Modes m = base;
  std::set<std::string> seen;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, end - at);
    const std::size_t eq = part.find('=');
    const std::string key = part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    auto bad = [&](const char* allowed) {
      return Error(fmt::format("megamoe-tune: modes '{}': part '{}': expected {}", text, part, allowed));
    };
    if (!seen.insert(key).second) throw bad("each of x, h and wire once");
    if (key == "x" && (value == "block" || value == "row")) m.x = value == "row" ? XScale::per_row : XScale::per_block;
    else if (key == "h" && (value == "block" || value == "static"))
      m.h = value == "static" ? HScale::static_bound : HScale::per_block;
    else if (key == "wire" && (value == "bf16" || value == "fp8"))
      m.wire = value == "fp8" ? CombineWire::fp8_blockwise_1x32 : CombineWire::bf16;
    else throw bad("x=block|row, h=block|static or wire=bf16|fp8");
    at = end + 1;
  }
  return m;
}

bool allowed(const Config& config, const BucketConfig& b, std::string* why) {
  try {
    check_bucket(config, b, fmt::format("$.buckets.{}", b.bucket), "(candidate)");
    return true;
  } catch (const ConfigError& e) {
    if (why) *why = e.what();
    return false;
  }
}

namespace {

// A stage's tiles narrowed to its form in `b`: 128 weight rows where 256 are refused, then the
// token tile at most the form's widest.
void narrow_stage(const Config& config, BucketConfig& b, int stage) {
  TileShape& t = stage == 1 ? b.stage1 : b.stage2;
  if (t.weight_tile != 128) {  // asked of the contract with the other stage at a tile every form takes
    BucketConfig alone = b;
    (stage == 1 ? alone.stage2 : alone.stage1) = TileShape{16, 128};
    if (!allowed(config, alone)) t.weight_tile = 128;
  }
  const int limit = hopper_max_bm(stage, stage_promotes(b, stage), b.weights == WeightSource::fp8_resident,
                                  t.weight_tile / int(kWeightRowsPerBlock));
  t.token_tile = std::min(t.token_tile, limit);
}

BucketConfig narrowed(const Config& config, BucketConfig b) {
  narrow_stage(config, b, 1);
  narrow_stage(config, b, 2);
  return b;
}

}  // namespace

BucketConfig with_modes(const Config& config, BucketConfig b, const Modes& m) {
  b.x_scale = m.x, b.h_scale = m.h, b.combine_wire = m.wire;
  return narrowed(config, b);
}

BucketConfig with_weights(const Config& config, BucketConfig b, WeightSource w) {
  b.weights = w;
  return narrowed(config, b);
}

std::vector<Modes> mode_candidates(const Config& config, const Modes& start, const SpaceOptions& space,
                                   std::vector<std::string>* pruned) {
  std::vector<Modes> out = {start};
  if (!space.modes) return out;
  const bool bounded = std::isfinite(activation_bound(config.activation));
  for (XScale x : {XScale::per_block, XScale::per_row})
    for (HScale h : {HScale::per_block, HScale::static_bound}) {
      const Modes m{x, h, start.wire};
      if (m == start) continue;
      if (h == HScale::static_bound && !bounded) {
        if (pruned)
          pruned->push_back(fmt::format("{}: a static h scale needs a bounded activation, and {} has none",
                                        to_string(m), megamoe::to_string(config.activation.kind)));
        continue;
      }
      out.push_back(m);
    }
  return out;
}

std::vector<Modes> wire_candidates(const Modes& best, const SpaceOptions& space) {
  std::vector<Modes> out = {best};
  if (!space.fp8_wire) return out;
  Modes other = best;
  other.wire = best.wire == CombineWire::bf16 ? CombineWire::fp8_blockwise_1x32 : CombineWire::bf16;
  out.push_back(other);
  return out;
}

double mean_rows_per_expert(const Config& config, int bucket) {
  return double(bucket) * config.model.topk / config.keys_experts_per_rank;
}

double busiest_rows_per_expert(const Config& config, int bucket) {
  const double mean = mean_rows_per_expert(config, bucket);
  const double p = std::min(1.0, double(config.model.topk) / config.keys_experts_per_rank);
  return std::min(double(bucket), mean + 3 * std::sqrt(mean * (1 - p)));
}

std::int64_t tokens_at_world(const Config& model, int world, int bucket) {
  const Config c = config_for_world(model, world);  // refuses a world that does not divide the experts
  const std::int64_t tokens = std::int64_t(bucket) * c.model.experts_per_rank / c.keys_experts_per_rank;
  return tokens >= 1 && tokens <= kMaxBucket && c.table_key(tokens) == bucket ? tokens : 0;
}

std::vector<int> token_tiles(const Config& config, int bucket) {
  const int top = std::min(int(kHopperMaxBm), int(std::ceil(busiest_rows_per_expert(config, bucket) / 16)) * 16 + 16);
  std::vector<int> tiles;
  for (int t = top; t >= 16 && tiles.size() < 8; t -= 16) tiles.push_back(t);
  std::reverse(tiles.begin(), tiles.end());
  return tiles;
}

std::string_view to_string(Knob k) {
  switch (k) {
    case Knob::stage1: return "stage1";
    case Knob::stage2: return "stage2";
    case Knob::weights: return "weights";
    case Knob::dispatch_blocks: return "dispatch blocks";
    case Knob::dispatch_persistent: return "dispatch persistent";
    case Knob::dispatch_stride: return "dispatch stride";
  }
  return "?";
}

std::vector<BucketConfig> candidates(const Config& config, const BucketConfig& incumbent, Knob knob,
                                     const SpaceOptions& space, std::vector<Pruned>* pruned) {
  std::vector<BucketConfig> out;
  auto consider = [&](const BucketConfig& b) {
    if (b.stage1.token_tile == incumbent.stage1.token_tile && b.stage1.weight_tile == incumbent.stage1.weight_tile &&
        b.stage2.token_tile == incumbent.stage2.token_tile && b.stage2.weight_tile == incumbent.stage2.weight_tile &&
        b.weights == incumbent.weights && b.dispatch.cus == incumbent.dispatch.cus &&
        b.dispatch.persistent == incumbent.dispatch.persistent && b.dispatch.stride == incumbent.dispatch.stride)
      return;  // the incumbent itself
    std::string why;
    if (allowed(config, b, &why)) out.push_back(b);
    else if (pruned) pruned->push_back({b, why});
  };
  if (knob == Knob::weights) {  // off where the space leaves the weight source as the start has it
    if (space.fp8_resident)
      consider(with_weights(config, incumbent, incumbent.weights == WeightSource::fp8_resident ? WeightSource::mxfp4
                                                                                              : WeightSource::fp8_resident));
    return out;
  }
  if (knob == Knob::dispatch_blocks || knob == Knob::dispatch_persistent || knob == Knob::dispatch_stride) {
    BucketConfig b = incumbent;
    if (knob == Knob::dispatch_persistent) {
      b.dispatch.persistent = !incumbent.dispatch.persistent;
      consider(b);
    } else if (knob == Knob::dispatch_blocks) {
      for (int blocks : kDispatchBlocks) b.dispatch.cus = blocks, consider(b);
    } else {
      for (int stride : kDispatchStrides) b.dispatch.stride = stride, consider(b);
    }
    return out;
  }
  for (int weight_tile : {128, 256})
    for (int t : token_tiles(config, incumbent.bucket)) {
      BucketConfig b = incumbent;
      (knob == Knob::stage1 ? b.stage1 : b.stage2) = TileShape{t, weight_tile};
      consider(b);
    }
  return out;
}

}  // namespace megamoe::tune
