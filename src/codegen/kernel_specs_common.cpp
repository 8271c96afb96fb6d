// The kernels every path launches: routing, the by-token quantization, combine; and the
// activation as rendered C++.
#include <algorithm>

#include <fmt/format.h>

#include "codegen/kernel_specs.hpp"

namespace megamoe {

namespace {
// Hex float literals keep the exact value of a parameter in the source (and its key).
std::string float_literal(float v) { return fmt::format("{:a}f", v); }
}  // namespace

std::string wire_tag(CombineWire w) { return w == CombineWire::bf16 ? "bf16" : "fp8x32"; }
std::string wire_code(CombineWire w) { return std::to_string(w == CombineWire::bf16 ? kWireBf16 : kWireFp8x32); }
std::string bounds_tag(bool bc) { return bc ? "bc1" : "bc0"; }
std::string bool_literal(bool v) { return v ? "true" : "false"; }
std::string x_scale_tag(int x_block) { return x_block == kXPerRow ? "xrow" : fmt::format("x{}", x_block); }
std::string h_scale_tag(const HopperScales& s) {
  if (!s.h_static) return fmt::format("h{}", kHopperHBlock);
  return fmt::format("hs{}{}", s.h_exponent < 0 ? "m" : "p", std::abs(s.h_exponent));
}

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
      c.preamble = fmt::format(
          "struct ActivationParams {{\n  static constexpr float limit = {};\n  static constexpr float alpha = {};\n"
          "  static constexpr float up_offset = {};\n}};\n",
          float_literal(act.limit), float_literal(act.alpha), float_literal(act.up_offset));
      c.type = "megamoe::SwiGLU<ActivationParams>";
      break;
  }
  return c;
}

TypedSpec<SharedRoutesArgs> shared_routes_spec() {
  TypedSpec<SharedRoutesArgs> s;
  s.family = "shared_routes";
  s.includes = {"moe/shared_routes.cuh"};
  s.function = "megamoe::shared_routes";
  s.threads = kSharedRoutesThreads;
  return s;
}

unsigned shared_routes_blocks(long long wide_slots, int multiprocessors) {
  return unsigned(std::clamp<long long>((wide_slots + kSharedRoutesThreads - 1) / kSharedRoutesThreads, 1,
                                        4LL * multiprocessors));
}

TypedSpec<RouteCountArgs> route_count_spec() {
  TypedSpec<RouteCountArgs> s;
  s.family = "route_count";
  s.includes = {"moe/route.cuh"};
  s.function = "megamoe::route_count";
  s.threads = kRouteThreads;
  return s;
}

TypedSpec<RouteArgs> route_spec() {
  TypedSpec<RouteArgs> s;
  s.family = "route";
  s.includes = {"moe/route.cuh"};
  s.function = "megamoe::route";
  s.threads = kRouteThreads;
  return s;
}

int route_blocks(long long slots) {
  return int(std::clamp<long long>((slots + kRouteSlotsPerBlock - 1) / kRouteSlotsPerBlock, 1, kRouteMaxBlocks));
}

TypedSpec<QuantizeRowsArgs> quantize_rows_spec(int block) {
  TypedSpec<QuantizeRowsArgs> s;
  s.family = "quantize_rows";
  s.name_parts = {fmt::format("fp8x{}", block)};
  s.includes = {"moe/quantize_rows.cuh"};
  s.function = "megamoe::quantize_rows_fp8";
  s.template_args = {std::to_string(block)};
  s.threads = kQuantizeThreads;
  return s;
}

TypedSpec<CombineArgs> combine_spec(CombineWire wire) {
  TypedSpec<CombineArgs> s;
  s.family = "combine";
  s.name_parts = {wire_tag(wire)};
  s.includes = {"moe/combine.cuh"};
  s.function = "megamoe::combine";
  s.template_args = {wire_code(wire)};
  s.threads = kCombineThreads;
  return s;
}

}  // namespace megamoe
