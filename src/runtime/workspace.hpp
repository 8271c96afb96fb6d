// The device buffers one Runtime's calls work in, allocated once, sized from the config, the
// options and the path (docs/layer.md, "Workspace", lists them with their sizes).
#pragma once
#include <cstddef>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/runtime.hpp"

namespace megamoe {

// Routed rows a rank holds: max_tokens x topk on one GPU; over several ranks
// RuntimeOptions::routed_rows_capacity, or the worst case world x max_tokens x topk (with shared
// experts, config at the kernels' slots: and max_tokens x shared_experts of the rank's own).
long long routed_rows_capacity(const Config& config, const RuntimeOptions& options);

// The bytes of each buffer of a Workspace, from the config at the path's shape, the options and
// the path: what Workspace::create allocates and Runtime::workspace_bytes states before it.
struct WorkspaceSizes {
  std::size_t route_counts = 0, expert_offsets = 0, tile_offsets1 = 0, tile_offsets2 = 0;
  std::size_t row_token = 0, row_slot = 0, row_weight = 0, slot_row = 0;
  std::size_t x_q = 0, x_scales = 0, h_q = 0, h_scales = 0, wire = 0, wire_scales = 0, errors = 0;
  std::size_t wide_ids = 0, wide_weights = 0;  // shared experts only
  int rows_capacity = 0, rows_pad = 0;
  std::size_t total() const;
};
WorkspaceSizes workspace_sizes(const Config& config, const RuntimeOptions& options, KernelPath path);

struct Workspace {
  static Workspace create(Device& device, const Config& config, const RuntimeOptions& options, KernelPath path);

  // Routing: route_count's rows per block and expert; the layout per expert (first routed row,
  // first Stage1 and Stage2 row tiles); per routed row its token, slot and route weight; per
  // slot its routed row.
  DeviceBuffer route_counts, expert_offsets, tile_offsets1, tile_offsets2;
  DeviceBuffer row_token, row_slot, row_weight, slot_row;
  // x and h in fp8 with their scales: x by token (portable, tensor_core) or routed (hopper), h
  // by routed row; e8m0 scales per 32 or 64 values, or on the Hopper path f32 per 128.
  DeviceBuffer x_q, x_scales, h_q, h_scales;
  // Stage2's rows for combine, by slot: bf16, or e4m3 in the first half with e8m0 wire_scales.
  DeviceBuffer wire, wire_scales;
  DeviceBuffer errors;    // kErrWords ints (interface/kernel_constants.cuh)
  // A model with shared experts: the call's ids and weights as shared_routes widens them (else none).
  DeviceBuffer wide_ids, wide_weights;
  int rows_capacity = 0;  // routed rows (routed_rows_capacity)
  int rows_pad = 0;       // rows per chunk of the routed layout: rows_capacity and a last tile's overhang

  // The error words as no call has touched them.
  void clear_errors(Device& device);
  std::size_t bytes() const;
};

}  // namespace megamoe
