// The Hopper path's launchers (codegen/path_kernels.hpp): on one GPU dispatch (x quantized once
// per token into the routed layout), then Stage1 and Stage2, every launch free to start early (the
// stage kernels request their first weights before they wait: docs/layer.md); over several ranks
// the stages with the protocol, x in the routed layout.
#include "runtime/launch_ep_stages.hpp"
#include "runtime/launch_layer.hpp"

namespace megamoe {

void HopperPath::launch(const LayerCall& c, const Kernels<Kernel>& k) {
  const ModelShape& m = c.model;
  Workspace& ws = c.ws;
  const DispatchRowsArgs d{
      .x = static_cast<const u16*>(c.x),
      .ids = c.ids,
      .slot_row = static_cast<const int*>(ws.slot_row.get()),
      .expert_offsets = static_cast<const int*>(ws.expert_offsets.get()),
      .tokens = c.tokens,
      .topk = m.topk,
      .experts = m.experts_per_rank,
      .model_dim = m.model_dim,
      .x_dim = c.x_dim,
      .rows_pad = ws.rows_pad,
      .rows_capacity = ws.rows_capacity,
      .xr = static_cast<u8*>(ws.x_q.get()),
      .xs = static_cast<float*>(ws.x_scales.get()),
      .errors = error_words(ws),
  };
  // A warp per task: a token, or a token's kDispatchChunks chunks of 128 values.
  const long long tasks = dispatch_rows_tasks(c.kernels.bucket->x_scale == XScale::per_row, c.tokens, m.model_dim);
  const int warps = kDispatchThreads / 32;
  c.launch(k.dispatch, unsigned(std::min<long long>((tasks + warps - 1) / warps, 16LL * c.device.multiprocessors())), d,
           true);
  c.mark(StageMark::quantized);

  Stage1HopperArgs a1{};
  Stage2HopperArgs a2{};
  layer_stage_args(c, weight_form(KernelPath::hopper, c.kernels.bucket->weights), a1, a2);
  const PathTiles& t = c.kernels.tiles;
  c.launch(k.stage1, c.tile_grid(t.bm1, t.columns1, k.stage1.planned_per_sm(), k.stage1.cluster), a1, true);
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(t.bm2, t.columns2, k.stage2.planned_per_sm()), a2, true);
}

void HopperPath::launch_ep(const EpCall& c, const EpKernels<Kernel>& k) {
  launch_ep_stages<Stage1HopperEpArgs, Stage2HopperEpArgs, Stage1HopperArgs, Stage2HopperArgs>(
      c, k, true, [](const EpCall& cc, auto& s1, auto& s2) { hopper_args(cc, s1, s2); });
}

}  // namespace megamoe
