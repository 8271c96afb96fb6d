// The stages of a rank's call over several ranks, as every path's launch_ep runs them
// (runtime/launch_layer_<path>.cpp): Stage1 with the dispatch inside it, or (serial) dispatch_ep
// and the single-GPU Stage1; then Stage2 onto the home ranks' wires.
#pragma once
#include <algorithm>

#include "codegen/kernel_specs.hpp"
#include "runtime/launch_ep.hpp"
#include "runtime/stage_args.hpp"

namespace megamoe {

template <class T>
T* in_region(const EpCall& c, std::uint64_t offset) {
  return reinterpret_cast<T*>(static_cast<u8*>(c.ep_ws.region->get()) + offset);
}

// The dispatch of the call, run by `blocks` blocks (persistent: they take no Stage1 tiles).
inline EpDispatch dispatch_args(const EpCall& c, int blocks, bool persistent, bool routed) {
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

inline void hopper_args(const EpCall& c, Stage1HopperArgs& s1, Stage2HopperArgs& s2) {
  stage_args(c, KernelPath::hopper, s1, s2, true);
  s1.x_scales = static_cast<const float*>(c.ws.x_scales.get());
}

// The stages of a path: Stage1 (with the dispatch, or after dispatch_ep), then Stage2.
template <class S1Ep, class S2Ep, class S1, class S2, class Set, class Fill>
void launch_ep_stages(const EpCall& c, const Set& k, bool routed, Fill fill) {
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
    c.launch(k.stage1_serial, c.tile_grid(kk.tiles.bm1, kk.tiles.columns1, k.stage1_serial.planned_per_sm(), cluster), s1, false);
  } else {
    c.mark(StageMark::quantized);
    const unsigned grid = std::min(c.tile_grid(kk.tiles.bm1, kk.tiles.columns1, k.stage1.planned_per_sm(), cluster),
                                   kk.resident_stage1 / cluster * cluster);
    // The dispatch blocks: the config's, in whole clusters; persistent ones leave a cluster at
    // least to the tiles.
    const int wanted = (std::max(c.bucket.dispatch.cus, 1) + cluster - 1) / cluster * cluster;
    const int blocks = std::min<int>(wanted, int(grid));
    const bool persistent = c.bucket.dispatch.persistent && blocks + cluster <= int(grid);
    c.launch(k.stage1, grid, S1Ep{s1, c.ep, dispatch_args(c, blocks, persistent, routed)});
  }
  c.mark(StageMark::stage1_done);
  c.launch(k.stage2, c.tile_grid(kk.tiles.bm2, kk.tiles.columns2, k.stage2.planned_per_sm()), S2Ep{s2, c.ep});
}

}  // namespace megamoe
