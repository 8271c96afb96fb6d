// The tensor-core path's launches: x to fp8 by token, then Stage1 and Stage2 over weight layout v3.
#include "runtime/launch_layer.hpp"

namespace megamoe {

void launch_stages_tensor_core(const LayerCall& c, const TensorCoreLoaded& k) {
  const ModelShape& m = c.model;
  launch_quantize_rows(c, k.quantize);
  c.mark(StageMark::quantized);
  Stage1Args a1{};
  Stage2Args a2{};
  layer_stage_args(c, WeightForm::layout_v3, a1, a2);
  c.launch(k.stage1,
           c.tile_grid(c.kernels.bm1, 2 * m.inter_dim / kWeightRowsPerBlock, k.stage1.planned_per_sm(), k.stage1.cluster),
           a1);
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(c.kernels.bm2, m.model_dim / kWeightRowsPerBlock, k.stage2.planned_per_sm()), a2);
}

}  // namespace megamoe
