// The portable path's launches: x to fp8 by token, then Stage1 and Stage2 over weight layout v1.
#include "runtime/layer_launch.hpp"
#include "runtime/stage_fields.hpp"

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
  launch_quantize_rows(c, k.quantize);
  c.mark(2);
  Stage1PortableArgs a1{};
  Stage2PortableArgs a2{};
  fill_routed_fields(m, ws, a1, a2);
  fill_weights(c.weights, a1, a2);
  a1.x_q = static_cast<const u8*>(ws.x_q.get());
  a1.x_scales = static_cast<const u8*>(ws.x_scales.get());
  a1.tokens = c.tokens;
  a2.wire = ws.wire.get();
  a2.wire_scales = static_cast<u8*>(ws.wire_scales.get());
  a2.slots = c.slots();
  c.launch(k.stage1, c.tile_grid(c.kernels.bm1, m.inter_dim / kPortableBn, 8), a1);
  c.mark(3);
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kPortableBn, 8), a2);
}

}  // namespace megamoe
