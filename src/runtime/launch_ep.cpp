// The launches of one call over several ranks (runtime/launch_ep.hpp), on every path.
#include <variant>

#include "codegen/kernel_specs.hpp"
#include "runtime/launch_ep.hpp"
#include "runtime/stage_args.hpp"

namespace megamoe {

namespace {

template <class T>
T* in_region(const EpCall& c, std::uint64_t offset) {
  return reinterpret_cast<T*>(static_cast<u8*>(c.ep_ws.region->get()) + offset);
}

// The dispatch of the call, run by `blocks` blocks (persistent: they take no Stage1 tiles).
EpDispatch dispatch_args(const EpCall& c, int blocks, bool persistent, bool routed) {
  return EpDispatch{
      .x = static_cast<const u16*>(c.x),
      .x_dim = c.x_dim,
      .ids = c.ids,
      .weights = c.route_weights,
      .tokens = c.tokens,
      .blocks = blocks,
      .persistent = persistent ? 1 : 0,
      .stride = c.bucket.dispatch.stride,
      .expert_offsets = static_cast<const int*>(c.ws.expert_offsets.get()),
      .row_token = static_cast<int*>(c.ws.row_token.get()),
      .row_slot = static_cast<int*>(c.ws.row_slot.get()),
      .row_weight = static_cast<float*>(c.ws.row_weight.get()),
      .xr = routed ? static_cast<u8*>(c.ws.x_q.get()) : nullptr,
      .xs = routed ? static_cast<float*>(c.ws.x_scales.get()) : nullptr,
      .rows_pad = c.ws.rows_pad,
      .rows_capacity = c.ws.rows_capacity,
  };
}

// Stage1's and Stage2's single-GPU arguments over this rank's received rows: x from the routed
// layout (Hopper) or the receive buffers, rows indexed by receive row (source x max_tokens +
// row), Stage2's rows coded by home wire row.
template <class Stage1, class Stage2>
void stage_args(const EpCall& c, KernelPath path, Stage1& s1, Stage2& s2, bool routed) {
  fill_stage_parts(c.model, c.ws, c.weights, weight_form(path, c.bucket.weights), s1, s2);
  s1.x_q = routed ? static_cast<const u8*>(c.ws.x_q.get()) : in_region<const u8>(c, c.ep.recv_x_at);
  s1.tokens = c.ep.world * c.ep.max_tokens;              // receive rows
  // Home wire rows, then (ranks of other nodes: the nvshmem transport) this rank's outbox rows.
  s2.slots = c.ep.world * c.ep.max_tokens * c.model.topk + (c.ep.remote > 0 ? c.ws.rows_capacity : 0);
  s2.wire = nullptr, s2.wire_scales = nullptr;           // the homes' wires: the EP Stage2 addresses them
}

// The portable and tensor-core paths: x and its e8m0 scales from the receive buffers.
template <class Stage1, class Stage2>
void by_row_args(const EpCall& c, KernelPath path, Stage1& s1, Stage2& s2) {
  stage_args(c, path, s1, s2, false);
  s1.x_scales = in_region<const u8>(c, c.ep.recv_scales_at);
}

void hopper_args(const EpCall& c, Stage1HopperArgs& s1, Stage2HopperArgs& s2) {
  stage_args(c, KernelPath::hopper, s1, s2, true);
  s1.x_scales = static_cast<const float*>(c.ws.x_scales.get());
}

// The stages of a path: Stage1 (with the dispatch, or after dispatch_ep), then Stage2.
template <class Loaded, class S1Ep, class S2Ep, class S1, class S2, class Fill>
void launch_stages(const EpCall& c, const Loaded& k, int col_tiles1, int col_tiles2, bool routed, Fill fill) {
  const EpBucketKernels& kk = c.kernels;
  S1 s1{};
  S2 s2{};
  fill(c, s1, s2);
  const int cluster = k.stage1.cluster;
  if (c.serial) {
    const unsigned dgrid = c.grid(std::min<long long>(kk.resident_dispatch, std::max(c.bucket.dispatch.cus, 1)));
    c.launch(kk.dispatch, dgrid, DispatchEpArgs{c.ep, dispatch_args(c, int(dgrid), false, routed)});
    c.mark(StageMark::quantized);
    // Not early: the single-GPU Stage1 kernels read rows written by the kernel before them (here
    // dispatch_ep) before they wait for it (on one GPU route wrote them, two kernels back).
    c.launch(k.stage1_serial, c.tile_grid(kk.bm1, col_tiles1, k.stage1_serial.planned_per_sm(), cluster), s1, false);
  } else {
    c.mark(StageMark::quantized);
    const unsigned grid = std::min(c.tile_grid(kk.bm1, col_tiles1, k.stage1.planned_per_sm(), cluster),
                                   kk.resident_stage1 / cluster * cluster);
    // The dispatch blocks: the config's, in whole clusters; persistent ones leave a cluster at
    // least to the tiles.
    const int wanted = (std::max(c.bucket.dispatch.cus, 1) + cluster - 1) / cluster * cluster;
    const int blocks = std::min<int>(wanted, int(grid));
    const bool persistent = c.bucket.dispatch.persistent && blocks + cluster <= int(grid);
    c.launch(k.stage1, grid, S1Ep{s1, c.ep, dispatch_args(c, blocks, persistent, routed)});
  }
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(kk.bm2, col_tiles2, k.stage2.planned_per_sm()), S2Ep{s2, c.ep});
}

}  // namespace

void launch_ep_call(const EpCall& c) {
  const ModelShape& m = c.model;
  const EpBucketKernels& k = c.kernels;  // StageMark::start: the caller's, before shared_routes
  const RouteEpArgs r{
      .ep = c.ep,
      .ids = c.ids,
      .tokens = c.tokens,
      .bm1 = k.bm1,
      .bm2 = k.bm2,
      .block_counts = static_cast<int*>(c.ep_ws.block_counts.get()),
      .expert_offsets = static_cast<int*>(c.ws.expert_offsets.get()),
      .tile_offsets1 = static_cast<int*>(c.ws.tile_offsets1.get()),
      .tile_offsets2 = static_cast<int*>(c.ws.tile_offsets2.get()),
      .rows_capacity = c.ws.rows_capacity,
  };
  c.launch(k.route, c.grid(std::min<long long>(route_blocks((long long)c.tokens * m.topk), k.resident_route)), r);
  c.mark(StageMark::routed);
  const int rows_per_block = kWeightRowsPerBlock;
  std::visit(
      [&](const auto& path) {
        using L = std::decay_t<decltype(path)>;
        if constexpr (std::is_same_v<L, PortableEpLoaded>)
          launch_stages<L, Stage1EpArgs, Stage2EpArgs, Stage1Args, Stage2Args>(
              c, path, m.inter_dim / kPortableBw, m.model_dim / kPortableBw, false,
              [](const EpCall& cc, auto& s1, auto& s2) { by_row_args(cc, KernelPath::portable, s1, s2); });
        else if constexpr (std::is_same_v<L, TensorCoreEpLoaded>)
          launch_stages<L, Stage1EpArgs, Stage2EpArgs, Stage1Args, Stage2Args>(
              c, path, 2 * m.inter_dim / rows_per_block, m.model_dim / rows_per_block, false,
              [](const EpCall& cc, auto& s1, auto& s2) { by_row_args(cc, KernelPath::tensor_core, s1, s2); });
        else
          launch_stages<L, Stage1HopperEpArgs, Stage2HopperEpArgs, Stage1HopperArgs, Stage2HopperArgs>(
              c, path, 2 * m.inter_dim / c.bucket.stage1.weight_tile, m.model_dim / c.bucket.stage2.weight_tile, true,
              [](const EpCall& cc, auto& s1, auto& s2) { hopper_args(cc, s1, s2); });
      },
      k.path);
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
