#include "codegen/kernel_catalog.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace megamoe {

namespace {
// Hex float literals keep the exact value of a parameter in the source (and its key).
std::string float_literal(float v) { return fmt::format("{:a}f", v); }
std::string wire_tag(CombineWire w) { return w == CombineWire::bf16 ? "bf16" : "fp8x32"; }
int wire_code(CombineWire w) { return w == CombineWire::bf16 ? 0 : 1; }
std::string bc_tag(bool bc) { return bc ? "bc1" : "bc0"; }
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

int portable_bm(int config_bm) { return std::min(config_bm, 64); }

KernelSpec route_spec() {
  KernelSpec s;
  s.family = "route";
  s.includes = {"moe/route.cuh"};
  s.params =
      "const int* ids, const float* weights, int tokens, int topk, int experts, int bm1, int bm2, "
      "int* expert_offsets, int* tile_offsets1, int* tile_offsets2, int* row_token, int* row_slot, "
      "float* row_weight, int* errors";
  s.body =
      "megamoe::route(ids, weights, tokens, topk, experts, bm1, bm2, expert_offsets, tile_offsets1, "
      "tile_offsets2, row_token, row_slot, row_weight, errors);";
  s.threads = 1024;  // kRouteThreads
  return s;
}

KernelSpec quantize_rows_spec() {
  KernelSpec s;
  s.family = "quantize_rows";
  s.name_parts = {"fp8x32"};
  s.includes = {"moe/quantize_rows.cuh"};
  s.params = "const megamoe::u16* x, int rows, int cols, megamoe::u8* q, megamoe::u8* scales";
  s.body = "megamoe::quantize_rows_fp8(x, rows, cols, q, scales);";
  s.threads = 256;  // kQuantizeThreads
  return s;
}

KernelSpec stage1_portable_spec(const Activation& act, int bm, bool bounds_check) {
  ActivationCode a = activation_code(act);
  KernelSpec s;
  s.family = "stage1_portable";
  s.name_parts = {a.tag, fmt::format("bm{}", bm), fmt::format("bn{}", kPortableBn), bc_tag(bounds_check)};
  s.includes = {"moe/stage1_portable.cuh"};
  s.preamble = a.preamble;
  s.params =
      "const megamoe::u8* x_q, const megamoe::u8* x_scales, const int* expert_offsets, const int* tile_offsets, "
      "const int* row_token, const megamoe::u8* w1_packed, const megamoe::u8* w1_scales, int experts, "
      "int model_dim, int inter_dim, megamoe::u8* h_q, megamoe::u8* h_scales, int rows_capacity, int tokens, "
      "int* errors";
  s.body = fmt::format(
      "megamoe::stage1_portable<{}, {}, {}, {}>(x_q, x_scales, expert_offsets, tile_offsets, row_token, "
      "w1_packed, w1_scales, experts, model_dim, inter_dim, h_q, h_scales, rows_capacity, tokens, errors);",
      a.type, bm, kPortableBn, bounds_check ? "true" : "false");
  s.threads = 256;
  return s;
}

KernelSpec stage2_portable_spec(int bm, CombineWire wire, bool bounds_check) {
  KernelSpec s;
  s.family = "stage2_portable";
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bn{}", kPortableBn), wire_tag(wire), bc_tag(bounds_check)};
  s.includes = {"moe/stage2_portable.cuh"};
  s.params =
      "const megamoe::u8* h_q, const megamoe::u8* h_scales, const int* expert_offsets, const int* tile_offsets, "
      "const int* row_slot, const float* row_weight, const megamoe::u8* w2_packed, const megamoe::u8* w2_scales, "
      "int experts, int model_dim, int inter_dim, void* wire, megamoe::u8* wire_scales, int rows_capacity, "
      "int slots, int* errors";
  s.body = fmt::format(
      "megamoe::stage2_portable<{}, {}, {}, {}>(h_q, h_scales, expert_offsets, tile_offsets, row_slot, "
      "row_weight, w2_packed, w2_scales, experts, model_dim, inter_dim, wire, wire_scales, rows_capacity, "
      "slots, errors);",
      bm, kPortableBn, wire_code(wire), bounds_check ? "true" : "false");
  s.threads = 256;
  return s;
}

KernelSpec combine_spec(CombineWire wire) {
  KernelSpec s;
  s.family = "combine";
  s.name_parts = {wire_tag(wire)};
  s.includes = {"moe/combine.cuh"};
  s.params =
      "const int* ids, int tokens, int topk, int experts, int model_dim, const void* wire, "
      "const megamoe::u8* wire_scales, megamoe::u16* y";
  s.body = fmt::format("megamoe::combine<{}>(ids, tokens, topk, experts, model_dim, wire, wire_scales, y);",
                       wire_code(wire));
  s.threads = 256;  // kCombineThreads
  return s;
}

LayerKernels layer_kernels(const Config& config, const BucketConfig& b) {
  return {route_spec(), quantize_rows_spec(),
          stage1_portable_spec(config.activation, portable_bm(b.stage1.bm), b.bounds_check),
          stage2_portable_spec(portable_bm(b.stage2.bm), b.combine_wire, b.bounds_check), combine_spec(b.combine_wire)};
}

std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket) {
  return layer_kernels(config, bucket).all();
}

}  // namespace megamoe
