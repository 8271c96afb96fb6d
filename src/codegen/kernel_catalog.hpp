// Which kernels a config's bucket needs, as KernelSpecs, and the entry-point parameters of each
// (the runtime passes its arguments in exactly this order).
#pragma once
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "megamoe/config.hpp"

namespace megamoe {

// The activation as rendered C++: a Params struct (in the preamble) and the type to use.
struct ActivationCode {
  std::string tag;       // "silu", "situv2", "swiglu": part of kernel names
  std::string preamble;  // struct ActivationParams {...}; (empty for silu)
  std::string type;      // e.g. "megamoe::SiTUv2<ActivationParams>"
};
ActivationCode activation_code(const Activation& act);

// The portable kernels' tile: BM from the config capped at 64, BN 64 (templates/moe/portable_gemm.cuh).
inline constexpr int kPortableBn = 64;
int portable_bm(int config_bm);

// route(ids, weights, tokens, topk, experts, bm1, bm2, expert_offsets, tile_offsets1,
//       tile_offsets2, row_token, row_slot, row_weight, errors); one block
KernelSpec route_spec();
// quantize_rows(x, rows, cols, q, scales)
KernelSpec quantize_rows_spec();
// stage1(x_q, x_scales, expert_offsets, tile_offsets1, row_token, w1_packed, w1_scales, experts,
//        model_dim, inter_dim, h_q, h_scales, rows_capacity, tokens, errors)
KernelSpec stage1_portable_spec(const Activation& act, int bm, bool bounds_check);
// stage2(h_q, h_scales, expert_offsets, tile_offsets2, row_slot, row_weight, w2_packed, w2_scales,
//        experts, model_dim, inter_dim, wire, wire_scales, rows_capacity, slots, errors)
KernelSpec stage2_portable_spec(int bm, CombineWire wire, bool bounds_check);
// combine(ids, tokens, topk, experts, model_dim, wire, wire_scales, y)
KernelSpec combine_spec(CombineWire wire);

struct LayerKernels {
  KernelSpec route, quantize, stage1, stage2, combine;
  std::vector<KernelSpec> all() const { return {route, quantize, stage1, stage2, combine}; }
};
LayerKernels layer_kernels(const Config& config, const BucketConfig& bucket);

// Every kernel a bucket of the config launches, in launch order.
std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket);

}  // namespace megamoe
