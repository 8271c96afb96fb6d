// The portable path's launches: x to fp8 by token, then Stage1 and Stage2 over weight layout v1.
#include "runtime/launch_layer.hpp"
#include "runtime/stage_args.hpp"

namespace megamoe {

void launch_stages_portable(const LayerCall& c, const PortableLoaded& k) {
  const ModelShape& m = c.model;
  Workspace& ws = c.ws;
  launch_quantize_rows(c, k.quantize);
  c.mark(StageMark::quantized);
  Stage1PortableArgs a1{};
  Stage2PortableArgs a2{};
  fill_stage_parts(m, ws, c.weights, WeightForm::layout_v1, a1, a2);
  a1.x_q = static_cast<const u8*>(ws.x_q.get());
  a1.x_scales = static_cast<const u8*>(ws.x_scales.get());
  a1.tokens = c.tokens;
  a2.wire = ws.wire.get();
  a2.wire_scales = static_cast<u8*>(ws.wire_scales.get());
  a2.slots = c.slots();
  c.launch(k.stage1, c.tile_grid(c.kernels.bm1, m.inter_dim / kPortableBw, 8), a1);
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kPortableBw, 8), a2);
}

}  // namespace megamoe
