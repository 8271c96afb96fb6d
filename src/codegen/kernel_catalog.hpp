// Which kernels a config's bucket needs, as KernelSpecs, and the entry-point parameters of each
// (the runtime passes its arguments in exactly this order).
#pragma once
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

// The activation as rendered C++: a Params struct (in the preamble) and the type to use.
struct ActivationCode {
  std::string tag;       // "silu", "situv2", "swiglu": part of kernel names
  std::string preamble;  // struct ActivationParams {...}; (empty for silu)
  std::string type;      // e.g. "megamoe::SiTUv2<ActivationParams>"
};
ActivationCode activation_code(const Activation& act);

// The portable kernels' tile: BM the config's rounded up to a power of two, at most 64; BN 64
// (templates/moe/portable_gemm.cuh).
inline constexpr int kPortableBn = 64;
int portable_bm(int config_bm);

// Routing (templates/moe/route.cuh) over route_blocks(slots) blocks of kRouteThreads, each
// taking about kRouteSlotsPerBlock slots. With more than one block:
// route_count(ids, tokens, topk, experts, counts, errors) writes counts[block][expert] (a
// workspace of route_blocks(max_tokens x topk) x experts ints), then
// route(ids, weights, tokens, topk, experts, bm1, bm2, counts, expert_offsets, tile_offsets1,
//       tile_offsets2, row_token, row_slot, row_weight, slot_row, errors) places the rows.
// With one block, route alone with counts = nullptr.
inline constexpr int kRouteThreads = 1024, kRouteSlotsPerBlock = 2048, kRouteMaxBlocks = 256;
KernelSpec route_count_spec();
KernelSpec route_spec();
int route_blocks(long long slots);
// quantize_rows(x, rows, cols, q, scales); blocks of 32 (portable) or 64 (tensor-core) values
KernelSpec quantize_rows_spec(int block = 32);
// stage1(x_q, x_scales, expert_offsets, tile_offsets1, row_token, w1_packed, w1_scales, experts,
//        model_dim, inter_dim, h_q, h_scales, rows_capacity, tokens, errors)
KernelSpec stage1_portable_spec(const Activation& act, int bm, bool bounds_check);
// stage2(h_q, h_scales, expert_offsets, tile_offsets2, row_slot, row_weight, w2_packed, w2_scales,
//        experts, model_dim, inter_dim, wire, wire_scales, rows_capacity, slots, errors)
KernelSpec stage2_portable_spec(int bm, CombineWire wire, bool bounds_check);
// combine(ids, tokens, topk, experts, model_dim, wire, wire_scales, y)
KernelSpec combine_spec(CombineWire wire);

// The tensor-core kernels' token tile: the config's BM rounded up to a power of two, at most 128;
// 128 weight rows per block.
inline constexpr int kTensorCoreWeightRows = 128;
inline constexpr int kTensorCoreBlock = 64;  // activation scale block along K (x and h)
// The Hopper path's activation scale blocks along K: h in blocks of 128 (one promotion per
// chunk); x in blocks of 256 where model_dim allows, else 128 (one promotion per block). The fp8
// wgmma keep 13 bits per 32-k step over a block: longer blocks leave the relL2 to the exact
// reference where it is but move the path away from the portable one, which it must stay within
// 5e-3 of (blocks of 128 / 256 / 512: 3.4 / 3.8 / 5.2e-3 on 32 Kimi-K3 tokens: docs/layer.md).
inline constexpr int kHopperHBlock = 128;
int hopper_x_block(int model_dim);
int tensor_core_bm(int config_bm);
inline constexpr int kMaxTokenTile = 176;  // the largest token tile of any path
int tensor_core_stages(int bm);  // pipeline depth, in chunks of 128 k

// stage1_mma(x_q, x_scales, expert_offsets, tile_offsets1, row_token, w1_units, w1_row_scale,
//            experts, model_dim, inter_dim, h_q, h_scales, rows_capacity, tokens, errors)
KernelSpec stage1_mma_spec(const Activation& act, int bm, int model_dim, bool bounds_check);
// stage2_mma(h_q, h_scales, expert_offsets, tile_offsets2, row_slot, row_weight, w2_units,
//            w2_row_scale, experts, model_dim, inter_dim, wire, wire_scales, rows_capacity, slots, errors)
KernelSpec stage2_mma_spec(int bm, int inter_dim, CombineWire wire, bool bounds_check);

// The Hopper kernels (templates/moe/wgmma_gemm.cuh): 128 weight rows per block in layout v3 as
// the tensor-core ones; x and h routed, their scales f32 (one per 128 k); stages
// sized to fill shared memory beside the epilogue tile (per token row: Stage1 68 floats of h,
// Stage2 132 floats of output).
inline constexpr int kHopperSharedLimit = 232448;  // dynamic shared memory an sm_90 block may have
// The Hopper token tile: the config's BM (a multiple of 16), capped at 176.
inline constexpr int kHopperMaxBm = 176;
int hopper_bm(int config_bm);
// Blocks per SM of a Hopper kernel: 2 for token tiles up to 48 (more warps to hide latencies).
int hopper_blocks_per_sm(int bm);
// Pipeline stages and dynamic shared memory of a Hopper kernel: stage 1, 2 or 3 (both in one
// kernel).
int hopper_stages(int bm, int stage);
int hopper_smem(int bm, int stage);
// dispatch_rows(x, ids, slot_row, expert_offsets, tokens, topk, experts, model_dim, rows_pad,
//               rows_capacity, xr, xs, errors):
// x quantized per routed row into the routed layout (templates/moe/routed_rows.cuh); it takes
// quantize_rows' place on the Hopper path.
KernelSpec dispatch_rows_spec(int x_block, bool bounds_check);
// The tensor-core kernels' parameters with x and h routed (x_q, x_scales, h_q, h_scales in the
// routed layout, scales f32) and rows_pad, the routed layout's rows per chunk, before rows_capacity.
KernelSpec stage1_wgmma_spec(const Activation& act, int bm, int x_block, bool bounds_check);
KernelSpec stage2_wgmma_spec(int bm, CombineWire wire, bool bounds_check);
// Both stages in one persistent kernel (templates/moe/stages_wgmma.cuh): Stage1's and Stage2's
// parameters, tile_offsets1 and tile_offsets2, and expert_done (dispatch zeroes it).
KernelSpec stages_wgmma_spec(const Activation& act, int bm, int x_block, CombineWire wire, bool bounds_check);

// Whether a (resolved) path's kernels can run for a backend and arch.
bool path_runs(KernelPath path, const ModelShape& shape, BackendKind backend, const std::string& arch);
// automatic resolved for a backend and arch; a path that cannot run there is an Error.
KernelPath resolve_path(KernelPath requested, const ModelShape& shape, BackendKind backend, const std::string& arch);

// How a (resolved) path rounds and sums: its x and h scale blocks and its matrix instructions'
// accumulation (Runtime::arithmetic(); the emulating reference repeats it).
PathArithmetic path_arithmetic(KernelPath path, const ModelShape& shape);

struct LayerKernels {
  KernelSpec route_count, route, quantize, stage1, stage2, combine;
  // Hopper with the bucket's fused_stages: both stages in one kernel, launched instead of stage1
  // and stage2.
  KernelSpec stages;
  bool fused = false;
  int bm1 = 0, bm2 = 0;  // token rows per Stage1 / Stage2 tile
  PathArithmetic arithmetic;  // the scale blocks the kernels were rendered for
  std::vector<KernelSpec> all() const {
    if (fused) return {route_count, route, quantize, stages, combine};
    return {route_count, route, quantize, stage1, stage2, combine};
  }
};
LayerKernels layer_kernels(const Config& config, const BucketConfig& bucket, KernelPath path);

// Every kernel a bucket of the config launches on a path (resolved), in launch order.
std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket, KernelPath path);

}  // namespace megamoe
