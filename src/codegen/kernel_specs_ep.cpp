// The kernels of a call over several ranks (templates/ep/, docs/ep.md): routing with the count
// exchange, the serial path's dispatch, combine, and each path's stage kernels, which are the
// single-GPU stage kernels of the same name with the protocol around them.
#include <fmt/format.h>

#include "codegen/kernel_specs.hpp"
#include "config/tile_sizes.hpp"

namespace megamoe {

namespace {
// An EP stage kernel made of a single-GPU one: the same specialisation, family and template with
// "_ep", the EP argument struct, and its own header.
template <class EpArgsT, class Args>
TypedSpec<EpArgsT> ep_stage_spec(const TypedSpec<Args>& base, const char* include) {
  TypedSpec<EpArgsT> s;
  static_cast<KernelSpec&>(s) = base;
  s.args = std::string("megamoe::") + EpArgsT::kName;
  s.family = base.family + "_ep";
  s.function = base.function + "_ep";
  s.includes = {include};
  return s;
}
}  // namespace

TypedSpec<RouteEpArgs> route_ep_spec(int world) {
  TypedSpec<RouteEpArgs> s;
  s.family = "route_ep";
  const int ranks = route_ep_ranks(world);
  if (ranks > 16) s.name_parts = {fmt::format("w{}", ranks)};
  s.includes = {"ep/route_ep.cuh"};
  s.function = "megamoe::route_ep";
  s.template_args = {std::to_string(ranks)};
  s.threads = kRouteThreads;
  return s;
}

TypedSpec<DispatchEpArgs> dispatch_ep_spec(int x_block, bool routed, bool bounds_check) {
  TypedSpec<DispatchEpArgs> s;
  s.family = "dispatch_ep";
  s.name_parts = {"fp8" + x_scale_tag(x_block), routed ? "routed" : "rows", bounds_tag(bounds_check)};
  s.includes = {"ep/dispatch_ep.cuh"};
  s.function = "megamoe::dispatch_ep";
  s.template_args = {std::to_string(x_block), bool_literal(routed), bool_literal(bounds_check)};
  s.threads = kDispatchThreads;
  return s;
}

TypedSpec<CombineEpArgs> combine_ep_spec(CombineWire wire, bool node_partials) {
  TypedSpec<CombineEpArgs> s = ep_stage_spec<CombineEpArgs>(combine_spec(wire), "ep/combine_ep.cuh");
  if (node_partials) {
    s.name_parts.push_back("nodes");
    s.template_args.push_back(bool_literal(true));
  }
  return s;
}

TypedSpec<NodeReduceEpArgs> node_reduce_ep_spec(CombineWire wire) {
  TypedSpec<NodeReduceEpArgs> s;
  s.family = "node_reduce_ep";
  s.name_parts = {wire == CombineWire::bf16 ? "bf16" : "fp8x32"};
  s.includes = {"ep/node_reduce_ep.cuh"};
  s.function = "megamoe::node_reduce_ep";
  s.template_args = {wire_code(wire)};
  s.threads = kNodeReduceThreads;
  return with_nvshmem(s);
}

TypedSpec<FlagPingPongArgs> flag_pingpong_spec() {
  TypedSpec<FlagPingPongArgs> s;
  s.family = "flag_pingpong";
  s.includes = {"ep/flag_pingpong.cuh"};
  s.function = "megamoe::flag_pingpong";
  s.threads = 32;
  return s;
}

TypedSpec<Stage1EpArgs> stage1_portable_ep_spec(const Activation& act, int bm, bool bounds_check) {
  return ep_stage_spec<Stage1EpArgs>(stage1_portable_spec(act, bm, bounds_check), "ep/portable_ep.cuh");
}

TypedSpec<Stage2EpArgs> stage2_portable_ep_spec(int bm, CombineWire wire, bool bounds_check) {
  return ep_stage_spec<Stage2EpArgs>(stage2_portable_spec(bm, wire, bounds_check), "ep/portable_ep.cuh");
}

TypedSpec<Stage1EpArgs> stage1_tensor_core_ep_spec(const Activation& act, int bm, int model_dim,
                                                             bool bounds_check) {
  return ep_stage_spec<Stage1EpArgs>(stage1_tensor_core_spec(act, bm, model_dim, bounds_check),
                                               "ep/tensor_core_ep.cuh");
}

TypedSpec<Stage2EpArgs> stage2_tensor_core_ep_spec(int bm, int inter_dim, CombineWire wire,
                                                             bool bounds_check) {
  return ep_stage_spec<Stage2EpArgs>(stage2_tensor_core_spec(bm, inter_dim, wire, bounds_check),
                                               "ep/tensor_core_ep.cuh");
}

TypedSpec<Stage1HopperEpArgs> stage1_hopper_ep_spec(const Activation& act, int bm, const HopperScales& scales,
                                                     bool bounds_check, WeightSource weights, int groups) {
  return ep_stage_spec<Stage1HopperEpArgs>(stage1_hopper_spec(act, bm, scales, bounds_check, true, weights, groups),
                                           "ep/hopper_ep.cuh");
}

TypedSpec<Stage2HopperEpArgs> stage2_hopper_ep_spec(int bm, CombineWire wire, const HopperScales& scales,
                                                     bool bounds_check, WeightSource weights, int groups) {
  return ep_stage_spec<Stage2HopperEpArgs>(stage2_hopper_spec(bm, wire, scales, bounds_check, true, weights, groups),
                                           "ep/hopper_ep.cuh");
}

}  // namespace megamoe
