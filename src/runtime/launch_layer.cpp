// Routing and combine, as every path launches them, and x to fp8 by token (the portable and
// tensor-core paths).
#include "runtime/launch_layer.hpp"

#include <algorithm>

#include "codegen/kernel_specs.hpp"
#include "runtime/stage_args.hpp"

namespace megamoe {

// The call's first launch may start early too: after our own combine (a burst of calls) it is
// scheduled while that finishes, and after any other kernel its wait is an ordinary stream order.
void launch_route(const LayerCall& c) {
  Workspace& ws = c.ws;
  const int experts = c.model.experts_per_rank;
  const unsigned grid = unsigned(route_blocks(c.slots()));
  int* counts = nullptr;
  if (grid > 1) {  // per-block counts first; one block counts for itself
    counts = static_cast<int*>(ws.route_counts.get());
    c.launch(c.kernels.route_count, grid,
             RouteCountArgs{.ids = c.ids,
                            .tokens = c.tokens,
                            .topk = c.model.topk,
                            .experts = experts,
                            .counts = counts,
                            .errors = error_words(ws)},
             true);
  }
  const RouteArgs a{
      .ids = c.ids,
      .weights = c.route_weights,
      .tokens = c.tokens,
      .topk = c.model.topk,
      .experts = experts,
      .bm1 = c.kernels.tiles.bm1,
      .bm2 = c.kernels.tiles.bm2,
      .counts = counts,
      .expert_offsets = static_cast<int*>(ws.expert_offsets.get()),
      .tile_offsets1 = static_cast<int*>(ws.tile_offsets1.get()),
      .tile_offsets2 = static_cast<int*>(ws.tile_offsets2.get()),
      .row_token = static_cast<int*>(ws.row_token.get()),
      .row_slot = static_cast<int*>(ws.row_slot.get()),
      .row_weight = static_cast<float*>(ws.row_weight.get()),
      .slot_row = static_cast<int*>(ws.slot_row.get()),
      .errors = error_words(ws),
  };
  c.launch(c.kernels.route, grid, a, true);
}

CallRoutes launch_shared_routes(const StreamLaunch& s, const Kernel<SharedRoutesArgs>& kernel, unsigned max_grid,
                                bool early, const ModelShape& m, int world, int rank, Workspace& ws, const int* ids,
                                const float* weights, int tokens) {
  const int S = m.shared_experts, per_rank = m.experts_per_rank - S;
  const CallRoutes wide{static_cast<const int*>(ws.wide_ids.get()), static_cast<const float*>(ws.wide_weights.get())};
  if (tokens == 0) return wide;  // nothing to widen; the call's kernels read no ids
  const SharedRoutesArgs a{.ids = ids,
                           .weights = weights,
                           .tokens = tokens,
                           .topk = m.topk - S,
                           .experts = world * per_rank,
                           .experts_per_rank = per_rank,
                           .shared = S,
                           .rank = rank,
                           .shared_weight = m.shared_expert_scale,
                           .wide_ids = static_cast<int*>(ws.wide_ids.get()),
                           .wide_weights = static_cast<float*>(ws.wide_weights.get())};
  const unsigned grid = std::min(shared_routes_blocks((long long)tokens * m.topk, s.device.multiprocessors()), max_grid);
  s.launch(kernel, std::max(grid, 1u), a, early);
  return wide;
}

// A block per 8 blocks of 32 values, at most 16 per SM.
void launch_quantize_rows(const LayerCall& c, const Kernel<QuantizeRowsArgs>& k) {
  const long long blocks = (long long)c.tokens * c.model.model_dim / 32;
  c.launch(k, unsigned(std::min<long long>((blocks + 7) / 8, 16LL * c.device.multiprocessors())),
           QuantizeRowsArgs{.x = static_cast<const u16*>(c.x),
                            .rows = c.tokens,
                            .cols = c.model.model_dim,
                            .x_cols = c.x_dim,
                            .q = static_cast<u8*>(c.ws.x_q.get()),
                            .scales = static_cast<u8*>(c.ws.x_scales.get())});
}

void launch_combine(const LayerCall& c) {
  const CombineArgs a{
      .ids = c.ids,
      .tokens = c.tokens,
      .topk = c.model.topk,
      .experts = c.model.experts_per_rank,
      .model_dim = c.model.model_dim,
      .y_dim = c.x_dim,
      .wire = c.ws.wire.get(),
      .wire_scales = static_cast<const u8*>(c.ws.wire_scales.get()),
      .y = static_cast<u16*>(c.y),
      .partials = nullptr,  // one GPU: every slot from the wire
      .node_experts = 0,
      .home_node = 0,
      .max_tokens = 0,
  };
  const long long tasks = (long long)c.tokens * (c.x_dim / 8);  // a thread per 8 columns of y
  c.launch(c.kernels.combine,
           unsigned(std::min<long long>((tasks + kCombineThreads - 1) / kCombineThreads, 16LL * c.device.multiprocessors())),
           a, true);
}

}  // namespace megamoe
