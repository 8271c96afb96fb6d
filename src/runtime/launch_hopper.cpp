// The Hopper path's launches: dispatch (x quantized once per token into the routed layout), then
// Stage1 and Stage2. Every launch may start early: the stage kernels request their first weights
// before they wait (docs/layer.md).
#include "runtime/layer_launch.hpp"
#include "runtime/stage_fields.hpp"

namespace megamoe {

void launch_stages_hopper(const LayerCall& c, const HopperLoaded& k) {
  const ModelShape& m = c.model;
  Workspace& ws = c.ws;
  const PreparedWeights& w = c.weights;
  int* errors = static_cast<int*>(ws.errors.get());

  DispatchRowsArgs d{};
  d.x = static_cast<const u16*>(c.x);
  d.ids = c.ids;
  d.slot_row = static_cast<const int*>(ws.slot_row.get());
  d.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  d.tokens = c.tokens, d.topk = m.topk, d.experts = m.experts_per_rank, d.model_dim = m.model_dim;
  d.rows_pad = ws.rows_pad, d.rows_capacity = ws.rows_capacity;
  d.xr = static_cast<u8*>(ws.x_q.get());
  d.xs = static_cast<float*>(ws.x_scales.get());
  d.errors = errors;
  // One warp per token and kDispatchChunks chunks of 128 values.
  const long long tasks = (long long)c.tokens * ((m.model_dim / 128 + kDispatchChunks - 1) / kDispatchChunks);
  const int warps = kDispatchThreads / 32;
  c.launch(k.dispatch, unsigned(std::min<long long>((tasks + warps - 1) / warps, 16LL * c.device.multiprocessors())), d,
           true);
  c.mark(2);

  Stage1HopperArgs a1{};
  Stage2HopperArgs a2{};
  fill_routed_fields(m, ws, a1, a2);
  fill_weights(w, a1, a2, c.kernels.bucket->weights);
  a1.x_q = static_cast<const u8*>(ws.x_q.get());
  a1.x_scales = static_cast<const float*>(ws.x_scales.get());
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
