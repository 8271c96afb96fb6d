// The launches of one call over several ranks (runtime/launch_ep.hpp), on every path.
#include <variant>

#include "codegen/kernel_specs.hpp"
#include "runtime/launch_ep.hpp"
#include "runtime/launch_ep_stages.hpp"
#include "runtime/stage_args.hpp"

namespace megamoe {

void launch_ep_call(const EpCall& c) {
  const ModelShape& m = c.model;
  const EpBucketKernels& k = c.kernels;  // StageMark::start: the caller's, before shared_routes
  const RouteEpArgs r{
      .ep = c.ep,
      .ids = c.ids,
      .tokens = c.tokens,
      .bm1 = k.tiles.bm1,
      .bm2 = k.tiles.bm2,
      .block_counts = static_cast<int*>(c.ep_ws.block_counts.get()),
      .expert_offsets = static_cast<int*>(c.ws.expert_offsets.get()),
      .tile_offsets1 = static_cast<int*>(c.ws.tile_offsets1.get()),
      .tile_offsets2 = static_cast<int*>(c.ws.tile_offsets2.get()),
      .rows_capacity = c.ws.rows_capacity,
  };
  c.launch(k.route, c.grid(std::min<long long>(route_blocks((long long)c.tokens * m.topk), k.resident_route)), r);
  c.mark(StageMark::routed);
  std::visit([&](const auto& set) { std::decay_t<decltype(set)>::Path::launch_ep(c, set); }, k.path);
  if (c.ep.remote > 0)  // over nodes: each gateway's node sums put home
    c.launch(*k.node_reduce, c.grid(std::min<long long>(2LL * c.device.multiprocessors(),
                                                        kNodeReduceMaxWarps / (kNodeReduceThreads / 32))),
             NodeReduceEpArgs{c.ep, c.ws.rows_capacity});
  c.mark(StageMark::stage2_done);
  const CombineArgs comb{
      .ids = c.ids,
      .tokens = c.tokens,
      .topk = m.topk,
      .experts = c.ep.world * m.experts_per_rank,  // ids are global
      .model_dim = m.model_dim,
      .y_dim = c.x_dim,
      .wire = in_region<void>(c, c.ep.wire_at),
      .wire_scales = in_region<const u8>(c, c.ep.wire_scales_at),
      .y = static_cast<u16*>(c.y),
      .partials = c.ep.remote > 0 ? in_region<const u16>(c, c.ep.partials_at) : nullptr,
      .node_experts = c.ep.node_size * m.experts_per_rank,
      .home_node = c.ep.rank / c.ep.node_size,
      .max_tokens = c.ep.max_tokens,
  };
  const long long tasks = (long long)c.tokens * (c.x_dim / 8);  // a thread per 8 columns of y
  c.launch(k.combine,
           c.grid(std::min<long long>((tasks + kCombineThreads - 1) / kCombineThreads, 16LL * c.device.multiprocessors())),
           CombineEpArgs{comb, c.ep});
  c.mark(StageMark::combined);
}

}  // namespace megamoe
