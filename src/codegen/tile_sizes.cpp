#include "codegen/tile_sizes.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

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
  s.x_block = b.x_scale == XScale::per_row ? int(kXPerRow) : hopper_x_block(c.model.model_dim);
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

int hopper_bm(int config_bm) { return std::min(config_bm, int(kHopperMaxBm)); }

int hopper_groups(const TileShape& tile) { return tile.weight_tile / kWeightRowsPerBlock; }

int hopper_blocks_per_sm(int bm, int groups) { return groups == 1 && bm <= 48 ? 2 : 1; }

// Stage1's static shared memory is Stage1PairShared; Stage2 has none. Each counted with the 1 KB
// that the cubins list in every sm_90 kernel using shared memory (the driver's own reservation
// per block is apart from the 227 KB a block may have).
int hopper_static_smem(int bm, int stage, bool ep) {
  return 1024 + (stage == 1 ? hopper_pair_shared_bytes(bm) : 0) + (ep ? 64 : 0);
}

// As many stages as fit beside the head and the region, 2 to 12: an SM's 228 KB, less 1 KB the
// system keeps per block, shared by its blocks.
int hopper_stages(int bm, int stage, bool ep, bool resident, int groups) {
  const int limit = hopper_blocks_per_sm(bm, groups) == 1 ? kHopperSharedLimit : 233472 / 2 - 1024;
  const int room = limit - hopper_static_smem(bm, stage, ep) -
                   hopper_dynamic_smem_bytes(bm, 0, hopper_region_ld(stage, groups), resident, groups);
  return std::clamp(room / hopper_stage_bytes(bm, resident, groups), 2, 12);
}

int hopper_smem(int bm, int stage, bool ep, bool resident, int groups) {
  return hopper_dynamic_smem_bytes(bm, hopper_stages(bm, stage, ep, resident, groups), hopper_region_ld(stage, groups),
                                   resident, groups);
}

}  // namespace megamoe
