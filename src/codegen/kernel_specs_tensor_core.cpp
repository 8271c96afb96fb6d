// The tensor-core path's stage kernels (templates/moe/stage{1,2}_tensor_core.cuh): fp8 mma.sync,
// NVIDIA sm_89 and later.
#include <fmt/format.h>

#include "codegen/kernel_specs.hpp"
#include "codegen/path_kernels.hpp"
#include "config/path_requirements.hpp"
#include "config/tile_sizes.hpp"

namespace megamoe {

TypedSpec<Stage1Args> stage1_tensor_core_spec(const Activation& act, int bm, int model_dim,
                                                        bool bounds_check) {
  ActivationCode a = activation_code(act);
  TypedSpec<Stage1Args> s;
  s.family = "stage1_tensor_core";
  s.name_parts = {a.tag, fmt::format("bm{}", bm), fmt::format("bw{}", kWeightRowsPerBlock),
                  fmt::format("s{}", tensor_core_stages(bm)), bounds_tag(bounds_check)};
  s.includes = {"moe/stage1_tensor_core.cuh"};
  s.preamble = a.preamble;
  s.function = "megamoe::stage1_tensor_core";
  s.template_args = {a.type, std::to_string(bm), std::to_string(tensor_core_stages(bm)), bool_literal(bounds_check)};
  s.threads = kTensorCoreThreads;
  s.shared_bytes = tensor_core_smem(bm, model_dim, 64);  // the epilogue: h's 64 columns
  return s;
}

TypedSpec<Stage2Args> stage2_tensor_core_spec(int bm, int inter_dim, CombineWire wire, bool bounds_check) {
  TypedSpec<Stage2Args> s;
  s.family = "stage2_tensor_core";
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bw{}", kWeightRowsPerBlock),
                  fmt::format("s{}", tensor_core_stages(bm)), wire_tag(wire), bounds_tag(bounds_check)};
  s.includes = {"moe/stage2_tensor_core.cuh"};
  s.function = "megamoe::stage2_tensor_core";
  s.template_args = {std::to_string(bm), std::to_string(tensor_core_stages(bm)), wire_code(wire),
                     bool_literal(bounds_check)};
  s.threads = kTensorCoreThreads;
  s.shared_bytes = tensor_core_smem(bm, inter_dim, kWeightRowsPerBlock);  // the epilogue: 128 output columns
  return s;
}

}  // namespace megamoe

// The path's definition (codegen/path_kernels.hpp): x and h in blocks of 64, sums exact.
namespace megamoe {

PathArithmetic TensorCorePath::arithmetic(const Config& config, const BucketConfig&) {
  const ModelShape shape = padded_model(kPath, config.model);
  return PathArithmetic{kTensorCoreScaleBlock, kTensorCoreScaleBlock, Accumulation::exact, false, shape.model_dim,
                        shape.inter_dim};
}

PathTiles TensorCorePath::tiles(const ModelShape& m, const BucketConfig& b) {
  return {tensor_core_bm(b.stage1.token_tile), tensor_core_bm(b.stage2.token_tile),
          2 * m.inter_dim / kWeightRowsPerBlock, m.model_dim / kWeightRowsPerBlock};
}

TensorCorePath::Kernels<TypedSpec> TensorCorePath::specs(const Config& config, const BucketConfig& b,
                                                         const PathTiles& t, const PathArithmetic& a) {
  const ModelShape m = padded_model(kPath, config.model);
  return {quantize_rows_spec(a.x), stage1_tensor_core_spec(config.activation, t.bm1, m.model_dim, b.bounds_check),
          stage2_tensor_core_spec(t.bm2, m.inter_dim, b.combine_wire, b.bounds_check)};
}

TensorCorePath::EpKernels<TypedSpec> TensorCorePath::ep_specs(const Config& config, const BucketConfig& b,
                                                              const PathTiles& t, const PathArithmetic&) {
  const ModelShape m = padded_model(kPath, config.model);
  return {stage1_tensor_core_ep_spec(config.activation, t.bm1, m.model_dim, b.bounds_check),
          stage2_tensor_core_ep_spec(t.bm2, m.inter_dim, b.combine_wire, b.bounds_check),
          stage1_tensor_core_spec(config.activation, t.bm1, m.model_dim, b.bounds_check)};
}

TypedSpec<DispatchEpArgs> TensorCorePath::dispatch_ep(const Config&, const BucketConfig& b, const PathArithmetic& a) {
  return dispatch_ep_spec(a.x, false, b.bounds_check);
}

}  // namespace megamoe
