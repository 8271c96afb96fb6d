// The Hopper path's kernels (templates/moe/dispatch_rows.cuh, stage{1,2}_hopper.cuh): wgmma, bulk copies on mbarriers, warp-specialised, sm_90a.
#include <fmt/format.h>

#include "codegen/kernel_specs.hpp"
#include "codegen/path_kernels.hpp"
#include "config/path_requirements.hpp"
#include "config/tile_sizes.hpp"

namespace megamoe {

TypedSpec<DispatchRowsArgs> dispatch_rows_spec(int x_block, bool bounds_check) {
  TypedSpec<DispatchRowsArgs> s;
  s.family = "dispatch_rows";
  s.name_parts = {"fp8" + x_scale_tag(x_block) + "f", bounds_tag(bounds_check)};
  s.includes = {"moe/dispatch_rows.cuh"};
  s.function = "megamoe::dispatch_rows";
  s.template_args = {std::to_string(x_block), bool_literal(bounds_check)};
  s.threads = kDispatchThreads;
  return s;
}

namespace {
// What every Hopper stage kernel of a token tile shares (`stage` as hopper_stages takes it): a
// producer and two consumer warpgroups per 128-row group of weight rows, its blocks per SM and
// shared memory, and the name parts that spell them.
// resident: the fp8-resident kernels (name part "fp8res"; the mxfp4 ones keep their names).
template <class Args>
TypedSpec<Args> hopper_tile_spec(const char* family, int bm, int stage, bool ep, bool resident, int groups) {
  TypedSpec<Args> s;
  s.family = family;
  s.function = std::string("megamoe::") + family;
  s.threads = hopper_threads(groups);
  s.min_blocks = hopper_blocks_per_sm(bm, groups);
  s.shared_bytes = hopper_smem(bm, stage, ep, resident, groups);
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bw{}", kWeightRowsPerBlock * groups),
                  fmt::format("s{}", hopper_stages(bm, stage, ep, resident, groups)), fmt::format("b{}", s.min_blocks)};
  if (resident) s.name_parts.push_back("fp8res");
  return s;
}
}  // namespace

TypedSpec<Stage1HopperArgs> stage1_hopper_spec(const Activation& act, int bm, const HopperScales& scales,
                                               bool bounds_check, bool ep, WeightSource weights, int groups) {
  ActivationCode a = activation_code(act);
  const bool resident = weights == WeightSource::fp8_resident;
  auto s = hopper_tile_spec<Stage1HopperArgs>("stage1_hopper", bm, 1, ep, resident, groups);
  s.name_parts.insert(s.name_parts.begin(), a.tag);
  s.name_parts.push_back(x_scale_tag(scales.x_block));
  if (scales.h_static) s.name_parts.push_back(h_scale_tag(scales));  // per 128: the names as before
  s.name_parts.push_back(bounds_tag(bounds_check));
  s.includes = {"moe/stage1_hopper.cuh"};
  s.preamble = a.preamble;
  s.template_args = {a.type, std::to_string(bm), std::to_string(hopper_stages(bm, 1, ep, resident, groups)),
                     std::to_string(s.min_blocks), std::to_string(groups), std::to_string(scales.x_block),
                     bool_literal(scales.h_static), std::to_string(scales.h_exponent), std::to_string(s.shared_bytes),
                     bool_literal(bounds_check), bool_literal(resident)};
  // h per 128 over 128 weight rows: the two tiles of a 128-column block of h side by side.
  s.cluster = !scales.h_static && groups == 1 ? 2 : 0;
  return s;
}

TypedSpec<Stage2HopperArgs> stage2_hopper_spec(int bm, CombineWire wire, const HopperScales& scales, bool bounds_check,
                                               bool ep, WeightSource weights, int groups) {
  const bool resident = weights == WeightSource::fp8_resident;
  auto s = hopper_tile_spec<Stage2HopperArgs>("stage2_hopper", bm, 2, ep, resident, groups);
  if (scales.h_static) s.name_parts.push_back(h_scale_tag(scales));
  s.name_parts.push_back(wire_tag(wire));
  s.name_parts.push_back(bounds_tag(bounds_check));
  s.includes = {"moe/stage2_hopper.cuh"};
  s.template_args = {std::to_string(bm),
                     std::to_string(hopper_stages(bm, 2, ep, resident, groups)),
                     std::to_string(s.min_blocks),
                     std::to_string(groups),
                     bool_literal(scales.h_static),
                     std::to_string(scales.h_exponent),
                     std::to_string(s.shared_bytes),
                     wire_code(wire),
                     bool_literal(bounds_check),
                     bool_literal(resident)};
  return s;
}

}  // namespace megamoe

// The path's definition (codegen/path_kernels.hpp): the scale modes of the bucket, the sums as
// sm_90's fp8 MMA makes them.
namespace megamoe {

PathArithmetic HopperPath::arithmetic(const Config& config, const BucketConfig& b) {
  const ModelShape shape = padded_model(kPath, config.model);
  const HopperScales s = hopper_scales(config, b);
  return PathArithmetic{s.x_block == kXPerRow ? shape.model_dim : s.x_block, kHopperHBlock, Accumulation::sm90_fp8_mma,
                        s.h_static, shape.model_dim, shape.inter_dim};
}

PathTiles HopperPath::tiles(const ModelShape& m, const BucketConfig& b) {
  return {hopper_bm(b, 1), hopper_bm(b, 2), 2 * m.inter_dim / b.stage1.weight_tile, m.model_dim / b.stage2.weight_tile};
}

HopperPath::Kernels<TypedSpec> HopperPath::specs(const Config& config, const BucketConfig& b, const PathTiles& t,
                                                 const PathArithmetic&) {
  const HopperScales scales = hopper_scales(config, b);
  return {dispatch_rows_spec(scales.x_block, b.bounds_check),
          stage1_hopper_spec(config.activation, t.bm1, scales, b.bounds_check, false, b.weights, hopper_groups(b.stage1)),
          stage2_hopper_spec(t.bm2, b.combine_wire, scales, b.bounds_check, false, b.weights, hopper_groups(b.stage2))};
}

HopperPath::EpKernels<TypedSpec> HopperPath::ep_specs(const Config& config, const BucketConfig& b, const PathTiles& t,
                                                      const PathArithmetic&) {
  const HopperScales scales = hopper_scales(config, b);
  return {stage1_hopper_ep_spec(config.activation, t.bm1, scales, b.bounds_check, b.weights, hopper_groups(b.stage1)),
          stage2_hopper_ep_spec(t.bm2, b.combine_wire, scales, b.bounds_check, b.weights, hopper_groups(b.stage2)),
          stage1_hopper_spec(config.activation, t.bm1, scales, b.bounds_check, false, b.weights, hopper_groups(b.stage1))};
}

TypedSpec<DispatchEpArgs> HopperPath::dispatch_ep(const Config& config, const BucketConfig& b, const PathArithmetic&) {
  return dispatch_ep_spec(hopper_scales(config, b).x_block, true, b.bounds_check);
}

}  // namespace megamoe
