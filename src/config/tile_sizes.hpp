// Each path's token tile, pipeline depth and shared memory, from a bucket's config (the sizes the
// kernels' layouts take are in templates/interface/kernel_constants.cuh, shared with them).
#pragma once
#include "interface/kernel_constants.cuh"
#include "megamoe/config.hpp"

namespace megamoe {

// Portable: the config's token tile rounded up to a power of two, at most 64; kPortableBw weight rows.
int portable_bm(int config_bm);

// Tensor-core: the config's token tile rounded up to a power of two, at most 128; pipeline depth in
// chunks of 128 k; the shared memory of a stage kernel whose GEMM has this K and whose epilogue
// tile has epilogue_cols columns.
int tensor_core_bm(int config_bm);
int tensor_core_stages(int bm);
int tensor_core_smem(int bm, int k, int epilogue_cols);

// Hopper: x in scale blocks of 256 where model_dim allows, else 128 (one promotion per block); h
// in blocks of 128 (one promotion per chunk). Why not longer: docs/layer.md, accuracy.
inline constexpr int kHopperHBlock = 128;
int hopper_x_block(int model_dim);
// A bucket's activation scales on the Hopper path (its x_scale and h_scale, docs/layer.md,
// "Scale modes"): x_block, the kernels' kXBlock (kXPerRow: one scale per token row); h_static,
// with h_exponent the one scale's exponent (fp8_block_exponent of the activation's bound).
struct HopperScales {
  int x_block = 256;
  bool h_static = false;
  int h_exponent = 0;
};
HopperScales hopper_scales(const Config& config, const BucketConfig& bucket);
// A stage's token tile (wgmma's N), the config's: a multiple of 16 up to hopper_max_bm of the
// stage's form (interface/kernel_constants.cuh); throws megamoe::Error past it.
int hopper_bm(const BucketConfig& b, int stage);
// 128-row groups of weight rows a block takes: a stage's weight_tile / 128.
int hopper_groups(const TileShape& tile);
// Blocks per SM: 2 for token tiles up to 48 (more warps to hide a chunk's latencies) with 128
// weight rows; 1 with 256 (as many consumer warps in one block).
int hopper_blocks_per_sm(int bm, int groups = 1);
// Pipeline stages and dynamic shared memory of a Hopper kernel: `stage` 1 or 2; and its static
// shared memory. ep: the kernel over several ranks, whose protocol keeps a few words of static shared memory more.
// resident: the fp8-resident kernels, whose stages hold a 16 KB weight unit. groups: 128-row groups
// of weight rows (a unit each per stage).
int hopper_stages(int bm, int stage, bool ep = false, bool resident = false, int groups = 1);
int hopper_smem(int bm, int stage, bool ep = false, bool resident = false, int groups = 1);
int hopper_static_smem(int bm, int stage, bool ep = false);

// The largest token tile of any path (the routed layout's overhang past its last row).
inline constexpr int kMaxTokenTile = kHopperMaxBm;

}  // namespace megamoe
