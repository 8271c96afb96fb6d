#include "runtime/workspace.hpp"

#include "codegen/kernel_specs.hpp"
#include "codegen/tile_sizes.hpp"

namespace megamoe {

Workspace Workspace::create(Device& d, const Config& config, const RuntimeOptions& options, KernelPath path) {
  const std::size_t T = options.max_tokens, K = config.model.topk, E = config.model.experts_per_rank,
                    D = config.model.model_dim, I = config.model.inter_dim, R = T * K;
  const bool hopper = path == KernelPath::hopper;
  Workspace w;
  w.rows_capacity = int(R);
  w.rows_pad = int(R) + kMaxTokenTile;
  w.route_counts = DeviceBuffer(d, std::size_t(route_blocks((long long)R)) * E * 4);
  w.expert_offsets = DeviceBuffer(d, (E + 1) * 4);
  w.tile_offsets1 = DeviceBuffer(d, (E + 1) * 4);
  w.tile_offsets2 = DeviceBuffer(d, (E + 1) * 4);
  w.row_token = DeviceBuffer(d, R * 4);
  w.row_slot = DeviceBuffer(d, R * 4);
  w.slot_row = DeviceBuffer(d, R * 4);
  w.row_weight = DeviceBuffer(d, R * 4);
  // The routed layout (templates/moe/routed_rows.cuh) holds 16 bytes of scales per row and 128
  // values; the by-token and by-row layouts one byte per 32 or 64 (D / 8 covers both).
  const std::size_t x_rows = hopper ? std::size_t(w.rows_pad) : T;
  const std::size_t h_rows = hopper ? std::size_t(w.rows_pad) : R;
  w.x_q = DeviceBuffer(d, x_rows * D);
  w.x_scales = DeviceBuffer(d, x_rows * D / 8);
  w.h_q = DeviceBuffer(d, h_rows * I);
  w.h_scales = DeviceBuffer(d, h_rows * I / 8);
  w.wire = DeviceBuffer(d, R * D * 2);
  w.wire_scales = DeviceBuffer(d, R * D / 32);
  w.errors = DeviceBuffer(d, kErrWords * 4);
  w.expert_done = DeviceBuffer(d, E * 4);  // zeroed by dispatch_rows in each call that uses it
  w.clear_errors(d);
  return w;
}

void Workspace::clear_errors(Device& d) {
  int init[kErrWords] = {};
  init[kErrFirstBadSlot] = kNoBadSlot;
  d.copy_to_device(errors.get(), init, sizeof init);
}

std::size_t Workspace::bytes() const {
  std::size_t n = 0;
  for (const DeviceBuffer* b : {&route_counts, &expert_offsets, &tile_offsets1, &tile_offsets2, &row_token, &row_slot,
                                &row_weight, &slot_row, &x_q, &x_scales, &h_q, &h_scales, &wire, &wire_scales, &errors,
                                &expert_done})
    n += b->bytes();
  return n;
}

}  // namespace megamoe
