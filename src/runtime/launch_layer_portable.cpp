// The portable path's launches: x to fp8 by token, then Stage1 and Stage2 over weight layout v1.
#include "runtime/launch_layer.hpp"

namespace megamoe {

void launch_stages_portable(const LayerCall& c, const PortableLoaded& k) {
  const ModelShape& m = c.model;
  launch_quantize_rows(c, k.quantize);
  c.mark(StageMark::quantized);
  Stage1Args a1{};
  Stage2Args a2{};
  layer_stage_args(c, WeightForm::layout_v1, a1, a2);
  c.launch(k.stage1, c.tile_grid(c.kernels.bm1, m.inter_dim / kPortableBw, 8), a1);
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kPortableBw, 8), a2);
}

}  // namespace megamoe
