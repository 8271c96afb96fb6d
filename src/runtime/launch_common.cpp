// Routing and combine, as every path launches them.
#include "codegen/kernel_specs.hpp"
#include "runtime/layer_launch.hpp"

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
             RouteCountArgs{c.ids, c.tokens, c.model.topk, experts, counts, static_cast<int*>(ws.errors.get())}, true);
  }
  RouteArgs a{};
  a.ids = c.ids;
  a.weights = c.route_weights;
  a.tokens = c.tokens, a.topk = c.model.topk, a.experts = experts;
  a.bm1 = c.kernels.bm1, a.bm2 = c.kernels.bm2;
  a.counts = counts;
  a.expert_offsets = static_cast<int*>(ws.expert_offsets.get());
  a.tile_offsets1 = static_cast<int*>(ws.tile_offsets1.get());
  a.tile_offsets2 = static_cast<int*>(ws.tile_offsets2.get());
  a.row_token = static_cast<int*>(ws.row_token.get());
  a.row_slot = static_cast<int*>(ws.row_slot.get());
  a.row_weight = static_cast<float*>(ws.row_weight.get());
  a.slot_row = static_cast<int*>(ws.slot_row.get());
  a.errors = static_cast<int*>(ws.errors.get());
  c.launch(c.kernels.route, grid, a, true);
}

void launch_combine(const LayerCall& c) {
  CombineArgs a{};
  a.ids = c.ids;
  a.tokens = c.tokens, a.topk = c.model.topk, a.experts = c.model.experts_per_rank, a.model_dim = c.model.model_dim;
  a.wire = c.ws.wire.get();
  a.wire_scales = static_cast<const u8*>(c.ws.wire_scales.get());
  a.y = static_cast<u16*>(c.y);
  const long long tasks = (long long)c.tokens * (c.model.model_dim / 8);  // a thread per 8 columns
  c.launch(c.kernels.combine,
           unsigned(std::min<long long>((tasks + kCombineThreads - 1) / kCombineThreads, 16LL * c.device.multiprocessors())),
           a, true);
}

}  // namespace megamoe
