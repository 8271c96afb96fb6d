// The tensor-core path's launches: x to fp8 by token, then Stage1 and Stage2 over weight layout v3.
#include "runtime/layer_launch.hpp"

namespace megamoe {

void launch_stages_tensor_core(const LayerCall& c, const TensorCoreLoaded& k) {
  const ModelShape& m = c.model;
  Workspace& ws = c.ws;
  const PreparedWeights& w = c.weights;
  launch_quantize_rows(c, k.quantize);
  c.mark(2);
  Stage1TensorCoreArgs a1{};
  a1.x_q = static_cast<const u8*>(ws.x_q.get());
  a1.x_scales = static_cast<const u8*>(ws.x_scales.get());
  a1.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  a1.tile_offsets = static_cast<const int*>(ws.tile_offsets1.get());
  a1.row_token = static_cast<const int*>(ws.row_token.get());
  a1.w1_units = static_cast<const u8*>(w.w1_units.get());
  a1.w1_row_scale = static_cast<const float*>(w.w1_row_scale.get());
  a1.experts = m.experts_per_rank, a1.model_dim = m.model_dim, a1.inter_dim = m.inter_dim;
  a1.h_q = static_cast<u8*>(ws.h_q.get());
  a1.h_scales = static_cast<u8*>(ws.h_scales.get());
  a1.rows_capacity = ws.rows_capacity, a1.tokens = c.tokens;
  a1.errors = static_cast<int*>(ws.errors.get());
  c.launch(k.stage1,
           c.tile_grid(c.kernels.bm1, 2 * m.inter_dim / kWeightRowsPerBlock, k.stage1.planned_per_sm(), k.stage1.cluster),
           a1);
  c.mark(3);
  Stage2TensorCoreArgs a2{};
  a2.h_q = static_cast<const u8*>(ws.h_q.get());
  a2.h_scales = static_cast<const u8*>(ws.h_scales.get());
  a2.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  a2.tile_offsets = static_cast<const int*>(ws.tile_offsets2.get());
  a2.row_slot = static_cast<const int*>(ws.row_slot.get());
  a2.row_weight = static_cast<const float*>(ws.row_weight.get());
  a2.w2_units = static_cast<const u8*>(w.w2_units.get());
  a2.w2_row_scale = static_cast<const float*>(w.w2_row_scale.get());
  a2.experts = m.experts_per_rank, a2.model_dim = m.model_dim, a2.inter_dim = m.inter_dim;
  a2.wire = ws.wire.get();
  a2.wire_scales = static_cast<u8*>(ws.wire_scales.get());
  a2.rows_capacity = ws.rows_capacity, a2.slots = c.slots();
  a2.errors = static_cast<int*>(ws.errors.get());
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kWeightRowsPerBlock, k.stage2.planned_per_sm()), a2);
}

}  // namespace megamoe
