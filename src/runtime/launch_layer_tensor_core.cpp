// The tensor-core path's launchers (codegen/path_kernels.hpp): on one GPU x to fp8 by token, then
// Stage1 and Stage2 over weight layout v3; over several ranks the stages with the protocol, x and
// its e8m0 scales from the receive buffers.
#include "runtime/launch_ep_stages.hpp"
#include "runtime/launch_layer.hpp"

namespace megamoe {

void TensorCorePath::launch(const LayerCall& c, const Kernels<Kernel>& k) {
  launch_quantize_rows(c, k.quantize);
  c.mark(StageMark::quantized);
  Stage1Args a1{};
  Stage2Args a2{};
  layer_stage_args(c, WeightForm::layout_v3, a1, a2);
  const PathTiles& t = c.kernels.tiles;
  c.launch(k.stage1, c.tile_grid(t.bm1, t.columns1, k.stage1.planned_per_sm(), k.stage1.cluster), a1);
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(t.bm2, t.columns2, k.stage2.planned_per_sm()), a2);
}

void TensorCorePath::launch_ep(const EpCall& c, const EpKernels<Kernel>& k) {
  launch_ep_stages<Stage1EpArgs, Stage2EpArgs, Stage1Args, Stage2Args>(
      c, k, false, [](const EpCall& cc, auto& s1, auto& s2) { by_row_args(cc, kPath, s1, s2); });
}

}  // namespace megamoe
