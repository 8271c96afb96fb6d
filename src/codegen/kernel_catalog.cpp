#include "codegen/kernel_catalog.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

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

namespace {
int ceil_power_of_two(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}
}  // namespace

int portable_bm(int config_bm) { return std::min(ceil_power_of_two(config_bm), 64); }

KernelSpec route_count_spec() {
  KernelSpec s;
  s.family = "route_count";
  s.includes = {"moe/route.cuh"};
  s.params = "const int* ids, int tokens, int topk, int experts, int* counts, int* errors";
  s.body = "megamoe::route_count(ids, tokens, topk, experts, counts, errors);";
  s.threads = kRouteThreads;
  return s;
}

KernelSpec route_spec() {
  KernelSpec s;
  s.family = "route";
  s.includes = {"moe/route.cuh"};
  s.params =
      "const int* ids, const float* weights, int tokens, int topk, int experts, int bm1, int bm2, "
      "const int* counts, int* expert_offsets, int* tile_offsets1, int* tile_offsets2, int* row_token, "
      "int* row_slot, float* row_weight, int* slot_row, int* errors";
  s.body =
      "megamoe::route(ids, weights, tokens, topk, experts, bm1, bm2, counts, expert_offsets, tile_offsets1, "
      "tile_offsets2, row_token, row_slot, row_weight, slot_row, errors);";
  s.threads = kRouteThreads;
  return s;
}

int route_blocks(long long slots) {
  return int(std::clamp<long long>((slots + kRouteSlotsPerBlock - 1) / kRouteSlotsPerBlock, 1, kRouteMaxBlocks));
}

KernelSpec quantize_rows_spec(int block) {
  KernelSpec s;
  s.family = "quantize_rows";
  s.name_parts = {fmt::format("fp8x{}", block)};
  s.includes = {"moe/quantize_rows.cuh"};
  s.params = "const megamoe::u16* x, int rows, int cols, megamoe::u8* q, megamoe::u8* scales";
  s.body = fmt::format("megamoe::quantize_rows_fp8<{}>(x, rows, cols, q, scales);", block);
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

int tensor_core_bm(int config_bm) { return std::min(ceil_power_of_two(config_bm), 128); }

// Deeper pipelines for small token tiles, where the weights' bandwidth is what counts and two
// blocks share an SM (shared memory per SM: 227 KB).
int tensor_core_stages(int bm) { return bm <= 16 ? 8 : bm <= 32 ? 6 : bm <= 64 ? 5 : 4; }

namespace {
std::string tensor_core_params(bool stage1) {
  return stage1 ? "const megamoe::u8* x_q, const megamoe::u8* x_scales, const int* expert_offsets, "
                  "const int* tile_offsets, const int* row_token, const megamoe::u8* w1_units, "
                  "const float* w1_row_scale, int experts, int model_dim, int inter_dim, "
                  "megamoe::u8* h_q, megamoe::u8* h_scales, int rows_capacity, int tokens, int* errors"
                : "const megamoe::u8* h_q, const megamoe::u8* h_scales, const int* expert_offsets, "
                  "const int* tile_offsets, const int* row_slot, const float* row_weight, const megamoe::u8* w2_units, "
                  "const float* w2_row_scale, int experts, int model_dim, int inter_dim, "
                  "void* wire, megamoe::u8* wire_scales, int rows_capacity, int slots, int* errors";
}
// Shared memory of MmaGemm<bm, stages> for a K (stages of activations, weight words and
// exponents, then float activation scales), or of the epilogue tile, whichever is larger.
int tensor_core_smem(int bm, int k, int epilogue_cols) {
  const int stage = bm * 144 + 8 * (1024 + 64);
  return std::max(tensor_core_stages(bm) * stage + bm * (k / kTensorCoreBlock) * 4, bm * (epilogue_cols + 1) * 4);
}
}  // namespace

KernelSpec stage1_mma_spec(const Activation& act, int bm, int model_dim, bool bounds_check) {
  ActivationCode a = activation_code(act);
  KernelSpec s;
  s.family = "stage1_mma";
  s.name_parts = {a.tag, fmt::format("bm{}", bm), fmt::format("bw{}", kTensorCoreWeightRows),
                  fmt::format("s{}", tensor_core_stages(bm)), bc_tag(bounds_check)};
  s.includes = {"moe/stage1_mma.cuh"};
  s.preamble = a.preamble;
  s.params = tensor_core_params(true);
  s.body = fmt::format(
      "megamoe::stage1_mma<{}, {}, {}, {}>(x_q, x_scales, expert_offsets, tile_offsets, row_token, w1_units, "
      "w1_row_scale, experts, model_dim, inter_dim, h_q, h_scales, rows_capacity, tokens, errors);",
      a.type, bm, tensor_core_stages(bm), bounds_check ? "true" : "false");
  s.threads = 256;
  s.shared_bytes = tensor_core_smem(bm, model_dim, 64);
  return s;
}

KernelSpec stage2_mma_spec(int bm, int inter_dim, CombineWire wire, bool bounds_check) {
  KernelSpec s;
  s.family = "stage2_mma";
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bw{}", kTensorCoreWeightRows),
                  fmt::format("s{}", tensor_core_stages(bm)), wire_tag(wire), bc_tag(bounds_check)};
  s.includes = {"moe/stage2_mma.cuh"};
  s.params = tensor_core_params(false);
  s.body = fmt::format(
      "megamoe::stage2_mma<{}, {}, {}, {}>(h_q, h_scales, expert_offsets, tile_offsets, row_slot, row_weight, "
      "w2_units, w2_row_scale, experts, model_dim, inter_dim, wire, wire_scales, rows_capacity, slots, "
      "errors);",
      bm, tensor_core_stages(bm), wire_code(wire), bounds_check ? "true" : "false");
  s.threads = 256;
  s.shared_bytes = tensor_core_smem(bm, inter_dim, kTensorCoreWeightRows);
  return s;
}

// Hopper (WgmmaGemm's layout): alignment slack, the barriers and the TileInfo ring, the epilogue
// region, and as many 1024-aligned stages (activations, weight words, exponents, scales) as fit,
// at most 12.
namespace {
int round_kb(int bytes) { return (bytes + 1023) / 1024 * 1024; }
int hopper_stage_bytes(int bm) { return round_kb(bm * 128 + 8 * 1024 + 8 * 64 + bm * 16); }
int hopper_fixed_bytes(int bm, int stage) {
  const int head = round_kb(512 + 4 * (12 + bm * 8));  // barriers, 4 x TileInfo<bm>
  // The epilogue region [bm][ld] floats: templates/moe/stage1_wgmma.cuh's kStage1RegionLd (h) and
  // stage2_wgmma.cuh's kStage2RegionLd (the output rows).
  constexpr int kStage1RegionLd = 68, kStage2RegionLd = 132;
  const int ld = stage == 1 ? kStage1RegionLd : kStage2RegionLd;  // stage 3 (both): Stage2's, the longer
  return 1024 + head + bm * ld * 4;
}
// The kernels' static shared memory: Stage1's (and both stages') row maxima, the block's own and
// its cluster peer's (3 x bm x 4 bytes), with two barriers (templates/moe/stage1_wgmma.cuh's
// Stage1PairShared); Stage2 has none. Counted with 1 KB more, as the cubins list it (cuobjdump
// shows 1 KB in every sm_90 kernel that uses shared memory; the driver's own reservation per
// block is apart from the 227 KB a block may have).
int hopper_static_bytes(int bm, int stage) { return 1024 + (stage == 2 ? 0 : 3 * bm * 4 + 16); }
}  // namespace

int hopper_bm(int config_bm) { return std::min(config_bm, kHopperMaxBm); }

int hopper_blocks_per_sm(int bm) { return bm <= 48 ? 2 : 1; }

int hopper_stages(int bm, int stage) {
  // An SM's 228 KB, less 1 KB the system keeps per block, shared by its blocks.
  const int limit = hopper_blocks_per_sm(bm) == 1 ? kHopperSharedLimit : 233472 / 2 - 1024;
  const int room = limit - hopper_static_bytes(bm, stage) - hopper_fixed_bytes(bm, stage);
  return std::clamp(room / hopper_stage_bytes(bm), 2, 12);
}

int hopper_smem(int bm, int stage) {
  return hopper_fixed_bytes(bm, stage) + hopper_stages(bm, stage) * hopper_stage_bytes(bm);
}

namespace {
std::string hopper_params(bool stage1) {
  return stage1 ? "const megamoe::u8* x_q, const float* x_scales, const int* expert_offsets, "
                  "const int* tile_offsets, const int* row_token, const megamoe::u8* w1_units, "
                  "const float* w1_row_scale, int experts, int model_dim, int inter_dim, "
                  "megamoe::u8* h_q, float* h_scales, int rows_pad, int rows_capacity, int tokens, int* errors"
                : "const megamoe::u8* h_q, const float* h_scales, const int* expert_offsets, "
                  "const int* tile_offsets, const int* row_slot, const float* row_weight, const megamoe::u8* w2_units, "
                  "const float* w2_row_scale, int experts, int model_dim, int inter_dim, "
                  "void* wire, megamoe::u8* wire_scales, int rows_pad, int rows_capacity, int slots, int* errors";
}
}  // namespace

int hopper_x_block(int model_dim) {
  return model_dim % 256 == 0 ? 256 : 128;
}

KernelSpec dispatch_rows_spec(int x_block, bool bounds_check) {
  KernelSpec s;
  s.family = "dispatch_rows";
  s.name_parts = {fmt::format("fp8x{}f", x_block), bc_tag(bounds_check)};
  s.includes = {"moe/dispatch_rows.cuh"};
  s.params =
      "const megamoe::u16* x, const int* ids, const int* slot_row, const int* expert_offsets, int tokens, int topk, "
      "int experts, int model_dim, int rows_pad, int rows_capacity, megamoe::u8* xr, float* xs, int* expert_done, "
      "int* errors";
  s.body = fmt::format(
      "megamoe::dispatch_rows<{}, {}>(x, ids, slot_row, expert_offsets, tokens, topk, experts, model_dim, rows_pad, "
      "rows_capacity, xr, xs, expert_done, errors);",
      x_block, bounds_check ? "true" : "false");
  s.threads = 256;  // kDispatchThreads
  return s;
}

namespace {
// What every Hopper stage kernel of a token tile shares (`stage` as hopper_stages takes it): 384
// threads (WgmmaGemm::kThreads: a producer and two consumer warpgroups), its blocks per SM and
// shared memory, and the name parts that spell them.
KernelSpec hopper_tile_spec(const char* family, int bm, int stage) {
  KernelSpec s;
  s.family = family;
  s.threads = 384;
  s.min_blocks = hopper_blocks_per_sm(bm);
  s.shared_bytes = hopper_smem(bm, stage);
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bw{}", kTensorCoreWeightRows),
                  fmt::format("s{}", hopper_stages(bm, stage)), fmt::format("b{}", s.min_blocks)};
  return s;
}
}  // namespace

KernelSpec stage1_wgmma_spec(const Activation& act, int bm, int x_block, bool bounds_check) {
  ActivationCode a = activation_code(act);
  const int stages = hopper_stages(bm, 1);
  KernelSpec s = hopper_tile_spec("stage1_wgmma", bm, 1);
  const int per_sm = s.min_blocks;
  s.name_parts.insert(s.name_parts.begin(), a.tag);
  s.name_parts.push_back(fmt::format("x{}", x_block));
  s.name_parts.push_back(bc_tag(bounds_check));
  s.includes = {"moe/stage1_wgmma.cuh"};
  s.preamble = a.preamble;
  s.params = hopper_params(true);
  s.body = fmt::format(
      "megamoe::stage1_wgmma<{}, {}, {}, {}, {}, {}, {}>(x_q, x_scales, expert_offsets, tile_offsets, row_token, "
      "w1_units, w1_row_scale, experts, model_dim, inter_dim, h_q, h_scales, rows_pad, rows_capacity, "
      "tokens, errors);",
      a.type, bm, stages, per_sm, x_block, s.shared_bytes, bounds_check ? "true" : "false");
  s.cluster = 2;  // the two tiles of a 128-column block of h side by side
  return s;
}

KernelSpec stages_wgmma_spec(const Activation& act, int bm, int x_block, CombineWire wire, bool bounds_check) {
  ActivationCode a = activation_code(act);
  const int stages = hopper_stages(bm, 3);
  KernelSpec s = hopper_tile_spec("stages_wgmma", bm, 3);
  const int per_sm = s.min_blocks;
  s.name_parts.insert(s.name_parts.begin(), a.tag);
  for (std::string part : {fmt::format("x{}", x_block), wire_tag(wire), bc_tag(bounds_check)})
    s.name_parts.push_back(part);
  s.includes = {"moe/stages_wgmma.cuh"};
  s.preamble = a.preamble;
  s.params =
      "const megamoe::u8* x_q, const float* x_scales, const int* expert_offsets, const int* tile_offsets1, "
      "const int* tile_offsets2, const int* row_token, const int* row_slot, const float* row_weight, "
      "const megamoe::u8* w1_units, const float* w1_row_scale, const megamoe::u8* w2_units, const float* w2_row_scale, "
      "int experts, int model_dim, int inter_dim, megamoe::u8* h_q, float* h_scales, void* wire, "
      "megamoe::u8* wire_scales, int* expert_done, int rows_pad, int rows_capacity, int tokens, int slots, int* errors";
  s.body = fmt::format(
      "megamoe::stages_wgmma<{}, {}, {}, {}, {}, {}, {}, {}>(x_q, x_scales, expert_offsets, tile_offsets1, "
      "tile_offsets2, row_token, row_slot, row_weight, w1_units, w1_row_scale, w2_units, w2_row_scale, experts, "
      "model_dim, inter_dim, h_q, h_scales, wire, wire_scales, expert_done, rows_pad, rows_capacity, tokens, slots, "
      "errors);",
      a.type, bm, stages, per_sm, x_block, s.shared_bytes, wire_code(wire), bounds_check ? "true" : "false");
  s.cluster = 2;  // Stage1's two tiles of a 128-column block of h side by side
  return s;
}

KernelSpec stage2_wgmma_spec(int bm, CombineWire wire, bool bounds_check) {
  const int stages = hopper_stages(bm, 2);
  KernelSpec s = hopper_tile_spec("stage2_wgmma", bm, 2);
  const int per_sm = s.min_blocks;
  s.name_parts.push_back(wire_tag(wire));
  s.name_parts.push_back(bc_tag(bounds_check));
  s.includes = {"moe/stage2_wgmma.cuh"};
  s.params = hopper_params(false);
  s.body = fmt::format(
      "megamoe::stage2_wgmma<{}, {}, {}, {}, {}, {}>(h_q, h_scales, expert_offsets, tile_offsets, row_slot, "
      "row_weight, w2_units, w2_row_scale, experts, model_dim, inter_dim, wire, wire_scales, rows_pad, "
      "rows_capacity, slots, errors);",
      bm, stages, per_sm, s.shared_bytes, wire_code(wire), bounds_check ? "true" : "false");
  return s;
}

bool path_runs(KernelPath path, const ModelShape& m, BackendKind backend, const std::string& arch) {
  int sm = 0;
  if (backend == BackendKind::cuda && arch.starts_with("sm_")) sm = std::atoi(arch.c_str() + 3);
  const bool fits = m.model_dim % 128 == 0 && m.inter_dim % 128 == 0;
  switch (path) {
    case KernelPath::portable: return true;
    case KernelPath::tensor_core: return sm >= 89 && fits;
    case KernelPath::hopper: return backend == BackendKind::cuda && arch == "sm_90a" && fits;
    case KernelPath::automatic: return true;
  }
  return false;
}

KernelPath resolve_path(KernelPath requested, const ModelShape& m, BackendKind backend, const std::string& arch) {
  if (requested == KernelPath::automatic) {
    for (KernelPath p : {KernelPath::hopper, KernelPath::tensor_core})
      if (path_runs(p, m, backend, arch)) return p;
    return KernelPath::portable;
  }
  if (!path_runs(requested, m, backend, arch))
    throw Error(fmt::format("megamoe: the {} path needs {} and model_dim and inter_dim multiples of 128; got {} {}, "
                            "model_dim {}, inter_dim {}",
                            to_string(requested),
                            requested == KernelPath::hopper ? "a cuda GPU of sm_90 (built as sm_90a)"
                                                            : "a cuda GPU of sm_89 or later",
                            to_string(backend), arch, m.model_dim, m.inter_dim));
  return requested;
}

PathArithmetic path_arithmetic(KernelPath path, const ModelShape& m) {
  switch (path) {
    case KernelPath::hopper: return {hopper_x_block(m.model_dim), kHopperHBlock, Accumulation::sm90_fp8_mma};
    case KernelPath::tensor_core: return {kTensorCoreBlock, kTensorCoreBlock, Accumulation::exact};
    default: return {32, 32, Accumulation::exact};
  }
}

LayerKernels layer_kernels(const Config& config, const BucketConfig& b, KernelPath path) {
  LayerKernels k;
  k.arithmetic = path_arithmetic(path, config.model);
  k.route_count = route_count_spec();
  k.route = route_spec();
  k.combine = combine_spec(b.combine_wire);
  if (path == KernelPath::tensor_core) {
    k.bm1 = tensor_core_bm(b.stage1.bm), k.bm2 = tensor_core_bm(b.stage2.bm);
    k.stage1 = stage1_mma_spec(config.activation, k.bm1, config.model.model_dim, b.bounds_check);
    k.stage2 = stage2_mma_spec(k.bm2, config.model.inter_dim, b.combine_wire, b.bounds_check);
  } else if (path == KernelPath::hopper) {
    k.bm1 = hopper_bm(b.stage1.bm), k.bm2 = hopper_bm(b.stage2.bm);
    k.stage1 = stage1_wgmma_spec(config.activation, k.bm1, k.arithmetic.x, b.bounds_check);
    k.stage2 = stage2_wgmma_spec(k.bm2, b.combine_wire, b.bounds_check);
    k.fused = b.fused_stages;
    if (k.fused) k.stages = stages_wgmma_spec(config.activation, k.bm1, k.arithmetic.x, b.combine_wire, b.bounds_check);
  } else {
    k.bm1 = portable_bm(b.stage1.bm), k.bm2 = portable_bm(b.stage2.bm);
    k.stage1 = stage1_portable_spec(config.activation, k.bm1, b.bounds_check);
    k.stage2 = stage2_portable_spec(k.bm2, b.combine_wire, b.bounds_check);
  }
  k.quantize =
      path == KernelPath::hopper ? dispatch_rows_spec(k.arithmetic.x, b.bounds_check) : quantize_rows_spec(k.arithmetic.x);
  return k;
}

std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket, KernelPath path) {
  return layer_kernels(config, bucket, path).all();
}

}  // namespace megamoe
