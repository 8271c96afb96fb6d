#include "codegen/kernel_catalog.hpp"

#include <fmt/format.h>

namespace megamoe {

namespace {
// Hex float literals keep the exact value of a parameter in the source (and its key).
std::string float_literal(float v) { return fmt::format("{:a}f", v); }
}  // namespace

ActivationCode activation_code(const Activation& act) {
  ActivationCode c;
  c.tag = std::string(to_string(act.kind));
  switch (act.kind) {
    case ActivationKind::silu:
      c.type = "megamoe::SiLU";
      break;
    case ActivationKind::situv2:
      c.preamble = fmt::format(
          "struct ActivationParams {{\n  static constexpr float beta = {};\n"
          "  static constexpr float linear_beta = {};\n}};\n",
          float_literal(act.beta), float_literal(act.linear_beta));
      c.type = "megamoe::SiTUv2<ActivationParams>";
      break;
    case ActivationKind::swiglu:
      c.preamble = fmt::format("struct ActivationParams {{\n  static constexpr float limit = {};\n}};\n",
                               float_literal(act.limit));
      c.type = "megamoe::SwiGLU<ActivationParams>";
      break;
  }
  return c;
}

KernelSpec act_tile_spec(const Activation& act, TileShape tile, bool bounds_check) {
  ActivationCode a = activation_code(act);
  KernelSpec s;
  s.family = "act_tile";
  s.name_parts = {a.tag, fmt::format("bm{}", tile.bm), fmt::format("bn{}", tile.bn),
                  fmt::format("bc{}", bounds_check ? 1 : 0)};
  s.includes = {"smoke/act_tile.cuh"};
  s.preamble = a.preamble;
  s.params = "const float* in, float* out, int rows, int cols, int row_capacity, int* error";
  s.body = fmt::format("megamoe::act_tile<{}, {}, {}, {}>(in, out, rows, cols, row_capacity, error);",
                       a.type, tile.bm, tile.bn, bounds_check ? "true" : "false");
  s.threads = 256;  // kActTileThreads
  return s;
}

std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket) {
  return {act_tile_spec(config.activation, bucket.stage1, bucket.bounds_check)};
}

}  // namespace megamoe
