// The portable path's stage kernels (templates/moe/stage{1,2}_portable.cuh): CUDA cores, any GPU.
#include <fmt/format.h>

#include "codegen/kernel_specs.hpp"
#include "codegen/path_kernels.hpp"
#include "config/path_requirements.hpp"
#include "config/tile_sizes.hpp"

namespace megamoe {

TypedSpec<Stage1Args> stage1_portable_spec(const Activation& act, int bm, bool bounds_check) {
  ActivationCode a = activation_code(act);
  TypedSpec<Stage1Args> s;
  s.family = "stage1_portable";
  s.name_parts = {a.tag, fmt::format("bm{}", bm), fmt::format("bw{}", kPortableBw), bounds_tag(bounds_check)};
  s.includes = {"moe/stage1_portable.cuh"};
  s.preamble = a.preamble;
  s.function = "megamoe::stage1_portable";
  s.template_args = {a.type, std::to_string(bm), std::to_string(kPortableBw), bool_literal(bounds_check)};
  s.threads = kPortableThreads;
  return s;
}

TypedSpec<Stage2Args> stage2_portable_spec(int bm, CombineWire wire, bool bounds_check) {
  TypedSpec<Stage2Args> s;
  s.family = "stage2_portable";
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bw{}", kPortableBw), wire_tag(wire), bounds_tag(bounds_check)};
  s.includes = {"moe/stage2_portable.cuh"};
  s.function = "megamoe::stage2_portable";
  s.template_args = {std::to_string(bm), std::to_string(kPortableBw), wire_code(wire), bool_literal(bounds_check)};
  s.threads = kPortableThreads;
  return s;
}

}  // namespace megamoe

// The path's definition (codegen/path_kernels.hpp): x and h in blocks of 32, sums exact.
namespace megamoe {

PathArithmetic PortablePath::arithmetic(const Config& config, const BucketConfig&) {
  const ModelShape shape = padded_model(kPath, config.model);
  return PathArithmetic{32, 32, Accumulation::exact, false, shape.model_dim, shape.inter_dim};
}

PathTiles PortablePath::tiles(const ModelShape& m, const BucketConfig& b) {
  return {portable_bm(b.stage1.token_tile), portable_bm(b.stage2.token_tile), m.inter_dim / kPortableBw,
          m.model_dim / kPortableBw};
}

PortablePath::Kernels<TypedSpec> PortablePath::specs(const Config& config, const BucketConfig& b, const PathTiles& t,
                                                     const PathArithmetic& a) {
  return {quantize_rows_spec(a.x), stage1_portable_spec(config.activation, t.bm1, b.bounds_check),
          stage2_portable_spec(t.bm2, b.combine_wire, b.bounds_check)};
}

PortablePath::EpKernels<TypedSpec> PortablePath::ep_specs(const Config& config, const BucketConfig& b,
                                                          const PathTiles& t, const PathArithmetic&) {
  return {stage1_portable_ep_spec(config.activation, t.bm1, b.bounds_check),
          stage2_portable_ep_spec(t.bm2, b.combine_wire, b.bounds_check),
          stage1_portable_spec(config.activation, t.bm1, b.bounds_check)};
}

TypedSpec<DispatchEpArgs> PortablePath::dispatch_ep(const Config&, const BucketConfig& b, const PathArithmetic& a) {
  return dispatch_ep_spec(a.x, false, b.bounds_check);
}

}  // namespace megamoe
