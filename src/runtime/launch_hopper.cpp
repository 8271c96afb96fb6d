// The Hopper path's launches: dispatch (x quantized once per token into the routed layout), then
// Stage1 and Stage2, or both in one kernel (the bucket's fused_stages). Every launch may start
// early: the stage kernels request their first weights before they wait (docs/layer.md).
#include "runtime/layer_launch.hpp"
#include "runtime/stage_fields.hpp"

namespace megamoe {

void launch_stages_hopper(const LayerCall& c, const HopperLoaded& k) {
  const ModelShape& m = c.model;
  Workspace& ws = c.ws;
  const PreparedWeights& w = c.weights;
  int* errors = static_cast<int*>(ws.errors.get());
  int* expert_done = k.stages ? static_cast<int*>(ws.expert_done.get()) : nullptr;

  DispatchRowsArgs d{};
  d.x = static_cast<const u16*>(c.x);
  d.ids = c.ids;
  d.slot_row = static_cast<const int*>(ws.slot_row.get());
  d.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  d.tokens = c.tokens, d.topk = m.topk, d.experts = m.experts_per_rank, d.model_dim = m.model_dim;
  d.rows_pad = ws.rows_pad, d.rows_capacity = ws.rows_capacity;
  d.xr = static_cast<u8*>(ws.x_q.get());
  d.xs = static_cast<float*>(ws.x_scales.get());
  d.expert_done = expert_done;
  d.errors = errors;
  // One warp per token and kDispatchChunks chunks of 128 values.
  const long long tasks = (long long)c.tokens * ((m.model_dim / 128 + kDispatchChunks - 1) / kDispatchChunks);
  const int warps = kDispatchThreads / 32;
  c.launch(k.dispatch, unsigned(std::min<long long>((tasks + warps - 1) / warps, 16LL * c.device.multiprocessors())), d,
           true);
  c.mark(2);

  const auto* x_q = static_cast<const u8*>(ws.x_q.get());
  const auto* x_scales = static_cast<const float*>(ws.x_scales.get());
  const auto* expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  if (k.stages) {  // both stages in one kernel: its time is reported as Stage1's
    StagesHopperArgs a{};
    a.x_q = x_q, a.x_scales = x_scales;
    a.expert_offsets = expert_offsets;
    a.tile_offsets1 = static_cast<const int*>(ws.tile_offsets1.get());
    a.tile_offsets2 = static_cast<const int*>(ws.tile_offsets2.get());
    a.row_token = static_cast<const int*>(ws.row_token.get());
    a.row_slot = static_cast<const int*>(ws.row_slot.get());
    a.row_weight = static_cast<const float*>(ws.row_weight.get());
    a.w1_units = static_cast<const u8*>(w.w1_units.get());
    a.w1_row_scale = static_cast<const float*>(w.w1_row_scale.get());
    a.w2_units = static_cast<const u8*>(w.w2_units.get());
    a.w2_row_scale = static_cast<const float*>(w.w2_row_scale.get());
    a.experts = m.experts_per_rank, a.model_dim = m.model_dim, a.inter_dim = m.inter_dim;
    a.h_q = static_cast<u8*>(ws.h_q.get());
    a.h_scales = static_cast<float*>(ws.h_scales.get());
    a.wire = ws.wire.get();
    a.wire_scales = static_cast<u8*>(ws.wire_scales.get());
    a.expert_done = expert_done;
    a.rows_pad = ws.rows_pad, a.rows_capacity = ws.rows_capacity, a.tokens = c.tokens, a.slots = c.slots();
    a.errors = errors;
    const int col_tiles = (2 * m.inter_dim + m.model_dim) / kWeightRowsPerBlock;
    const unsigned grid =
        std::min(c.tile_grid(c.kernels.bm1, col_tiles, k.stages->planned_per_sm(), k.stages->cluster), k.stages_grid_cap);
    c.launch(*k.stages, grid, a, true);
    c.mark(3);
    return;
  }
  Stage1HopperArgs a1{};
  Stage2HopperArgs a2{};
  fill_routed_fields(m, ws, a1, a2);
  fill_weights(w, a1, a2, c.kernels.bucket->weights);
  a1.x_q = x_q, a1.x_scales = x_scales;
  a1.rows_pad = a2.rows_pad = ws.rows_pad;
  a1.tokens = c.tokens;
  a2.wire = ws.wire.get();
  a2.wire_scales = static_cast<u8*>(ws.wire_scales.get());
  a2.slots = c.slots();
  c.launch(k.stage1,
           c.tile_grid(c.kernels.bm1, 2 * m.inter_dim / kWeightRowsPerBlock, k.stage1.planned_per_sm(), k.stage1.cluster),
           a1, true);
  c.mark(3);
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kWeightRowsPerBlock, k.stage2.planned_per_sm()), a2, true);
}

}  // namespace megamoe
