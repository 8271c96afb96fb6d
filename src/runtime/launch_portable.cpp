// The portable path's launches: x to fp8 by token, then Stage1 and Stage2 over weight layout v1.
#include "runtime/layer_launch.hpp"

namespace megamoe {

namespace {
// A block per 8 blocks of 32 values, at most 16 per SM. (Shared with the tensor-core path.)
unsigned quantize_grid(const LayerCall& c) {
  const long long blocks = (long long)c.tokens * c.model.model_dim / 32;
  return unsigned(std::min<long long>((blocks + 7) / 8, 16LL * c.device.multiprocessors()));
}
}  // namespace

void launch_quantize_rows(const LayerCall& c, const Kernel<QuantizeRowsArgs>& k) {
  c.launch(k, quantize_grid(c),
           QuantizeRowsArgs{static_cast<const u16*>(c.x), c.tokens, c.model.model_dim,
                            static_cast<u8*>(c.ws.x_q.get()), static_cast<u8*>(c.ws.x_scales.get())});
}

void launch_stages_portable(const LayerCall& c, const PortableLoaded& k) {
  const ModelShape& m = c.model;
  Workspace& ws = c.ws;
  const PreparedWeights& w = c.weights;
  launch_quantize_rows(c, k.quantize);
  c.mark(2);
  Stage1PortableArgs a1{};
  a1.x_q = static_cast<const u8*>(ws.x_q.get());
  a1.x_scales = static_cast<const u8*>(ws.x_scales.get());
  a1.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  a1.tile_offsets = static_cast<const int*>(ws.tile_offsets1.get());
  a1.row_token = static_cast<const int*>(ws.row_token.get());
  a1.w1_packed = static_cast<const u8*>(w.w1_packed.get());
  a1.w1_scales = static_cast<const u8*>(w.w1_scales.get());
  a1.experts = m.experts_per_rank, a1.model_dim = m.model_dim, a1.inter_dim = m.inter_dim;
  a1.h_q = static_cast<u8*>(ws.h_q.get());
  a1.h_scales = static_cast<u8*>(ws.h_scales.get());
  a1.rows_capacity = ws.rows_capacity, a1.tokens = c.tokens;
  a1.errors = static_cast<int*>(ws.errors.get());
  c.launch(k.stage1, c.tile_grid(c.kernels.bm1, m.inter_dim / kPortableBn, 8), a1);
  c.mark(3);
  Stage2PortableArgs a2{};
  a2.h_q = static_cast<const u8*>(ws.h_q.get());
  a2.h_scales = static_cast<const u8*>(ws.h_scales.get());
  a2.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  a2.tile_offsets = static_cast<const int*>(ws.tile_offsets2.get());
  a2.row_slot = static_cast<const int*>(ws.row_slot.get());
  a2.row_weight = static_cast<const float*>(ws.row_weight.get());
  a2.w2_packed = static_cast<const u8*>(w.w2_packed.get());
  a2.w2_scales = static_cast<const u8*>(w.w2_scales.get());
  a2.experts = m.experts_per_rank, a2.model_dim = m.model_dim, a2.inter_dim = m.inter_dim;
  a2.wire = ws.wire.get();
  a2.wire_scales = static_cast<u8*>(ws.wire_scales.get());
  a2.rows_capacity = ws.rows_capacity, a2.slots = c.slots();
  a2.errors = static_cast<int*>(ws.errors.get());
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kPortableBn, 8), a2);
}

}  // namespace megamoe
