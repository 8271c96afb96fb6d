// The spec builders of every kernel family: what each is specialised on, its name, block size and
// shared memory. Each returns the spec typed by its argument struct
// (templates/interface/kernel_args.cuh), which the runtime launches it with.
#pragma once
#include <string>

#include "codegen/kernel_spec.hpp"
#include "config/tile_sizes.hpp"
#include "interface/kernel_args.cuh"
#include "megamoe/config.hpp"

namespace megamoe {

// The activation as rendered C++: a Params struct (in the preamble) and the type to use.
struct ActivationCode {
  std::string tag;       // "silu", "situv2", "swiglu": part of kernel names
  std::string preamble;  // struct ActivationParams {...}; (empty for silu)
  std::string type;      // e.g. "megamoe::SiTUv2<ActivationParams>"
};
ActivationCode activation_code(const Activation& act);

// --- every path (kernel_specs_common.cpp) ---
// A call's ids and weights widened by the model's shared experts (moe/shared_routes.cuh), and its grid.
TypedSpec<SharedRoutesArgs> shared_routes_spec();
unsigned shared_routes_blocks(long long wide_slots, int multiprocessors);
// Routing over route_blocks(slots) blocks: with more than one, route_count, then route.
TypedSpec<RouteCountArgs> route_count_spec();
TypedSpec<RouteArgs> route_spec();
int route_blocks(long long slots);
TypedSpec<CombineArgs> combine_spec(CombineWire wire);
// x to fp8 by token in blocks of 32 (portable) or 64 (tensor_core).
TypedSpec<QuantizeRowsArgs> quantize_rows_spec(int block = 32);

// --- portable (kernel_specs_portable.cpp) ---
TypedSpec<Stage1Args> stage1_portable_spec(const Activation& act, int bm, bool bounds_check);
TypedSpec<Stage2Args> stage2_portable_spec(int bm, CombineWire wire, bool bounds_check);

// --- tensor_core (kernel_specs_tensor_core.cpp) ---
TypedSpec<Stage1Args> stage1_tensor_core_spec(const Activation& act, int bm, int model_dim, bool bounds_check);
TypedSpec<Stage2Args> stage2_tensor_core_spec(int bm, int inter_dim, CombineWire wire, bool bounds_check);

// --- hopper (kernel_specs_hopper.cpp) ---
// x quantized once per token into the routed layout: quantize_rows' place on this path; x_block
// kXPerRow (name part "fp8xrow"): one scale per row.
TypedSpec<DispatchRowsArgs> dispatch_rows_spec(int x_block, bool bounds_check);
// scales: the bucket's (config/tile_sizes.hpp; name parts "x256" or "xrow", "h128" or "hs" and
// the exponent). ep: sized for the EP kernel made of it (kernel_specs_ep.cpp), which keeps a few
// more words of static shared memory. weights: fp8_resident reads the e4m3 copy (name part "fp8res").
// groups: 128-row groups of weight rows a block takes (name part "bw128" or "bw256").
TypedSpec<Stage1HopperArgs> stage1_hopper_spec(const Activation& act, int bm, const HopperScales& scales,
                                               bool bounds_check, bool ep = false,
                                               WeightSource weights = WeightSource::mxfp4, int groups = 1);
TypedSpec<Stage2HopperArgs> stage2_hopper_spec(int bm, CombineWire wire, const HopperScales& scales, bool bounds_check,
                                               bool ep = false, WeightSource weights = WeightSource::mxfp4,
                                               int groups = 1);

// --- expert parallelism (kernel_specs_ep.cpp; templates/ep/) ---
// world: the group's ranks (past 16, the kernel's per-thread counts are twice as wide).
TypedSpec<RouteEpArgs> route_ep_spec(int world);
// routed: x into the routed layout (the Hopper path), else only the rows' metadata.
TypedSpec<DispatchEpArgs> dispatch_ep_spec(int x_block, bool routed, bool bounds_check);
// node_partials: the nvshmem transport's (the slots of another node come as that node's one row).
TypedSpec<CombineEpArgs> combine_ep_spec(CombineWire wire, bool node_partials = false);
// The nvshmem transport over nodes: the slots a gateway's node served summed and put home after
// Stage2 (ep/node_reduce_ep.cuh).
TypedSpec<NodeReduceEpArgs> node_reduce_ep_spec(CombineWire wire);
// `spec` compiled for the nvshmem transport: MEGAMOE_NVSHMEM defined, NVSHMEM's device library
// linked in, "shmem" in its name.
template <class Args>
TypedSpec<Args> with_nvshmem(TypedSpec<Args> spec) {
  spec.nvshmem = true;
  spec.name_parts.push_back("shmem");
  return spec;
}
// Not a layer kernel: megamoe-bench's flag latency between two ranks (ep/flag_pingpong.cuh).
TypedSpec<FlagPingPongArgs> flag_pingpong_spec();
TypedSpec<Stage1EpArgs> stage1_portable_ep_spec(const Activation& act, int bm, bool bounds_check);
TypedSpec<Stage2EpArgs> stage2_portable_ep_spec(int bm, CombineWire wire, bool bounds_check);
TypedSpec<Stage1EpArgs> stage1_tensor_core_ep_spec(const Activation& act, int bm, int model_dim,
                                                             bool bounds_check);
TypedSpec<Stage2EpArgs> stage2_tensor_core_ep_spec(int bm, int inter_dim, CombineWire wire, bool bounds_check);
TypedSpec<Stage1HopperEpArgs> stage1_hopper_ep_spec(const Activation& act, int bm, const HopperScales& scales,
                                                     bool bounds_check, WeightSource weights = WeightSource::mxfp4,
                                                     int groups = 1);
TypedSpec<Stage2HopperEpArgs> stage2_hopper_ep_spec(int bm, CombineWire wire, const HopperScales& scales,
                                                     bool bounds_check, WeightSource weights = WeightSource::mxfp4,
                                                     int groups = 1);

// Name parts shared by the builders.
std::string wire_tag(CombineWire wire);            // "bf16", "fp8x32"
std::string wire_code(CombineWire wire);           // the kWire template argument
std::string bounds_tag(bool bounds_check);         // "bc0", "bc1"
std::string bool_literal(bool value);              // "true", "false"
std::string x_scale_tag(int x_block);              // "x256", "xrow" (kXPerRow)
std::string h_scale_tag(const HopperScales& s);    // "h128", "hs" and the exponent ("hsm2": 2^-2)

}  // namespace megamoe
