#include "runtime/workspace.hpp"

#include <algorithm>

#include "codegen/kernel_specs.hpp"
#include "config/tile_sizes.hpp"

namespace megamoe {

long long routed_rows_capacity(const Config& config, const RuntimeOptions& o) {
  // Shared slots (config's topk counts them) take only the rank's own tokens.
  const long long worst = (long long)o.world * o.max_tokens * config.model.topk -
                          (long long)(o.world - 1) * o.max_tokens * config.model.shared_experts;
  return o.world > 1 && o.routed_rows_capacity > 0 ? std::min(o.routed_rows_capacity, worst) : worst;
}

WorkspaceSizes workspace_sizes(const Config& config, const RuntimeOptions& options, KernelPath path) {
  const bool ep = options.world > 1;  // several ranks: the rest is in EpWorkspace
  const std::size_t T = options.max_tokens, K = config.model.topk, E = config.model.experts_per_rank,
                    D = config.model.model_dim, I = config.model.inter_dim;
  const std::size_t R = std::size_t(routed_rows_capacity(config, options));
  const bool hopper = path == KernelPath::hopper;
  WorkspaceSizes s;
  s.rows_capacity = int(R);
  s.rows_pad = int(R) + kMaxTokenTile;
  s.route_counts = ep ? 4 : std::size_t(route_blocks((long long)(T * K))) * E * 4;
  s.expert_offsets = s.tile_offsets1 = s.tile_offsets2 = (E + 1) * 4;
  s.row_token = s.row_slot = s.row_weight = R * 4;
  s.slot_row = ep ? 4 : T * K * 4;
  // The routed layout (templates/moe/routed_rows.cuh) holds 16 bytes of scales per row and 128
  // values; the by-token and by-row layouts one byte per 32 or 64 (D / 8 covers both). Over
  // several ranks the portable and tensor-core paths read x from the receive buffers.
  const std::size_t x_rows = hopper ? std::size_t(s.rows_pad) : ep ? 0 : T;
  const std::size_t h_rows = hopper ? std::size_t(s.rows_pad) : R;
  s.x_q = x_rows * D;
  s.x_scales = x_rows * D / 8;
  s.h_q = h_rows * I;
  s.h_scales = h_rows * I / 8;
  s.wire = ep ? 16 : T * K * D * 2;  // several ranks: in the symmetric region
  s.wire_scales = ep ? 16 : T * K * D / 32;
  s.errors = kErrWords * 4;
  // A model with shared experts: the call's ids and weights widened by them (config: the kernels' topk).
  s.wide_ids = s.wide_weights = config.model.shared_experts > 0 ? T * K * 4 : 0;
  return s;
}

std::size_t WorkspaceSizes::total() const {
  return route_counts + expert_offsets + tile_offsets1 + tile_offsets2 + row_token + row_slot + row_weight + slot_row +
         x_q + x_scales + h_q + h_scales + wire + wire_scales + errors + wide_ids + wide_weights;
}

Workspace Workspace::create(Device& d, const Config& config, const RuntimeOptions& options, KernelPath path) {
  const WorkspaceSizes s = workspace_sizes(config, options, path);
  Workspace w;
  w.rows_capacity = s.rows_capacity;
  w.rows_pad = s.rows_pad;
  w.route_counts = DeviceBuffer(d, s.route_counts);
  w.expert_offsets = DeviceBuffer(d, s.expert_offsets);
  w.tile_offsets1 = DeviceBuffer(d, s.tile_offsets1);
  w.tile_offsets2 = DeviceBuffer(d, s.tile_offsets2);
  w.row_token = DeviceBuffer(d, s.row_token);
  w.row_slot = DeviceBuffer(d, s.row_slot);
  w.row_weight = DeviceBuffer(d, s.row_weight);
  w.slot_row = DeviceBuffer(d, s.slot_row);
  w.x_q = DeviceBuffer(d, s.x_q);
  w.x_scales = DeviceBuffer(d, s.x_scales);
  w.h_q = DeviceBuffer(d, s.h_q);
  w.h_scales = DeviceBuffer(d, s.h_scales);
  w.wire = DeviceBuffer(d, s.wire);
  w.wire_scales = DeviceBuffer(d, s.wire_scales);
  for (const DeviceBuffer* b : {&w.expert_offsets, &w.tile_offsets1, &w.tile_offsets2})
    d.fill_bytes(b->get(), 0, b->bytes());  // an empty layout until a call lays one out
  w.errors = DeviceBuffer(d, s.errors);
  w.clear_errors(d);
  if (s.wide_ids) w.wide_ids = DeviceBuffer(d, s.wide_ids), w.wide_weights = DeviceBuffer(d, s.wide_weights);
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
                                &wide_ids, &wide_weights})
    n += b->bytes();
  return n;
}

}  // namespace megamoe
