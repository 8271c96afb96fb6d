#include "config/tile_sizes.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "config/path_requirements.hpp"
#include "formats/formats.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

namespace {
int ceil_power_of_two(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}
}  // namespace

// --- portable ---
int portable_bm(int config_bm) { return std::min(ceil_power_of_two(config_bm), 64); }

// --- tensor_core ---
int tensor_core_bm(int config_bm) { return std::min(ceil_power_of_two(config_bm), 128); }

// Deeper pipelines for small token tiles, where the weights' bandwidth is what counts and two
// blocks share an SM (shared memory per SM: 227 KB).
int tensor_core_stages(int bm) { return bm <= 16 ? 8 : bm <= 32 ? 6 : bm <= 64 ? 5 : 4; }

int tensor_core_smem(int bm, int k, int epilogue_cols) {
  return tensor_core_smem_bytes(bm, tensor_core_stages(bm), k, epilogue_cols);
}

// --- hopper ---
int hopper_x_block(int model_dim) { return model_dim % 256 == 0 ? 256 : 128; }

HopperScales hopper_scales(const Config& c, const BucketConfig& b) {
  HopperScales s;
  s.x_block = b.x_scale == XScale::per_row ? int(kXPerRow) : hopper_x_block(padded_model(KernelPath::hopper, c.model).model_dim);
  s.h_static = b.h_scale == HScale::static_bound;
  if (s.h_static) {
    const float bound = activation_bound(c.activation);
    if (!std::isfinite(bound))
      throw Error(fmt::format("megamoe: config {} bucket {}: h_scale static needs a bounded activation, and {} has none",
                              c.name, b.bucket, to_string(c.activation.kind)));
    s.h_exponent = formats::fp8_block_exponent(bound);
  }
  return s;
}

int hopper_bm(const BucketConfig& b, int stage) {
  const TileShape& tile = stage == 1 ? b.stage1 : b.stage2;
  const int limit = hopper_max_bm(stage, stage_promotes(b, stage), b.weights == WeightSource::fp8_resident,
                                  hopper_groups(tile));
  if (tile.token_tile > limit)  // parse_config refuses it first (config_schema.cpp); a config built in code may not
    throw Error(fmt::format("megamoe: bucket {}: stage{}.token_tile {} is wider than the Hopper kernels take here "
                            "(at most {}: docs/configs.md, \"Token tiles\")",
                            b.bucket, stage, tile.token_tile, limit));
  return tile.token_tile;
}

int hopper_groups(const TileShape& tile) { return tile.weight_tile / kWeightRowsPerBlock; }

int hopper_blocks_per_sm(int bm, int groups) { return groups == 1 && bm <= 48 ? 2 : 1; }

int hopper_static_smem(int bm, int stage, bool ep) { return hopper_static_smem_bytes(bm, stage, ep); }

// As many stages as fit beside the head and the region, 2 to 12: an SM's 228 KB, less 1 KB the
// system keeps per block, shared by its blocks.
int hopper_stages(int bm, int stage, bool ep, bool resident, int groups) {
  const int limit = hopper_blocks_per_sm(bm, groups) == 1 ? kHopperSharedLimit : 233472 / 2 - 1024;
  return std::clamp(hopper_stages_that_fit(bm, stage, ep, resident, groups, limit), 2, 12);
}

int hopper_smem(int bm, int stage, bool ep, bool resident, int groups) {
  return hopper_dynamic_smem_bytes(bm, hopper_stages(bm, stage, ep, resident, groups), hopper_region_ld(stage, groups),
                                   resident, groups);
}

}  // namespace megamoe
