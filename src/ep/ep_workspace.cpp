#include "ep/ep_workspace.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/nvshmem_library.hpp"
#include "megamoe/errors.hpp"
#include "codegen/kernel_specs.hpp"

namespace megamoe {

EpPlanSizes ep_plan_sizes(const Config& config, const GroupOptions& o) {
  const std::size_t W = o.world, E = config.model.experts_per_rank, T = o.max_tokens, K = config.model.topk;
  EpPlanSizes s;
  s.state = kStateWords * 4;
  s.dest_row = T * W * 4;
  s.slot_rank = T * K * 4;
  s.segment = s.segment_rows = s.ready = E * W * 4;
  s.block_counts = std::size_t(kRouteMaxBlocks) * (W * E + W) * 4;
  if (ep_over_nodes(o)) s.gateway_rows = W * T * 4, s.forwarded = W * 4;
  return s;
}

int ep_node_size(const GroupOptions& o) { return o.node_size > 0 ? std::min(o.node_size, o.world) : o.world; }

bool ep_over_nodes(const GroupOptions& o) { return o.transport == Transport::nvshmem && ep_node_size(o) < o.world; }

SymmetricLayout ep_symmetric_layout(const Config& config, const GroupOptions& o, int x_block,
                                    long long rows_capacity) {
  const ModelShape& m = config.model;
  return symmetric_layout(o.world, m.experts_per_rank, o.max_tokens, m.topk, m.model_dim, x_block,
                          ep_over_nodes(o) ? rows_capacity : -1, ep_node_size(o));
}

SymmetricRegion::SymmetricRegion(Device& device, std::size_t bytes, bool nvshmem) : bytes_(bytes) {
  if (nvshmem) {
    device.make_current();
    ptr_ = Nvshmem::get().malloc(bytes);
  } else {
    owned_ = DeviceBuffer(device, bytes);
    ptr_ = owned_.get();
  }
}

// NVSHMEM's free is collective (a barrier of every PE): a rank destroyed while a peer has failed
// or exited would hang in it, so the heap's region is kept until the process ends, as NVSHMEM is.
SymmetricRegion::~SymmetricRegion() = default;

std::unique_ptr<EpWorkspace> EpWorkspace::create(Device& d, const Config& config, const GroupOptions& o,
                                                 int x_block, long long rows_capacity) {
  auto w = std::make_unique<EpWorkspace>();
  const ModelShape& m = config.model;
  w->device = &d;
  w->world = o.world, w->rank = o.rank, w->experts = m.experts_per_rank, w->max_tokens = o.max_tokens;
  w->topk = m.topk, w->model_dim = m.model_dim, w->x_block = x_block;
  w->layout = ep_symmetric_layout(config, o, x_block, rows_capacity);
  const bool shmem = o.transport == Transport::nvshmem;
  w->region = std::make_unique<SymmetricRegion>(d, w->layout.bytes, shmem);
  const EpPlanSizes s = ep_plan_sizes(config, o);
  w->state = DeviceBuffer(d, s.state);
  w->dest_row = DeviceBuffer(d, s.dest_row);
  w->slot_rank = DeviceBuffer(d, s.slot_rank);
  w->segment = DeviceBuffer(d, s.segment);
  w->segment_rows = DeviceBuffer(d, s.segment_rows);
  w->ready = DeviceBuffer(d, s.ready);
  w->block_counts = DeviceBuffer(d, s.block_counts);
  if (s.gateway_rows) w->gateway_rows = DeviceBuffer(d, s.gateway_rows), w->forwarded = DeviceBuffer(d, s.forwarded);
  w->peers.assign(o.world, nullptr);
  w->peers[o.rank] = w->region->get();
  w->node_size = ep_node_size(o), w->node_first = o.rank / w->node_size * w->node_size;
  if (shmem)  // a rank of this node as NVSHMEM maps it here; another node's by puts
    for (int r = 0; r < o.world; ++r) {
      const bool same_node = r / w->node_size == o.rank / w->node_size;
      if (r == o.rank || !same_node) continue;
      w->peers[r] = Nvshmem::get().ptr(w->region->get(), r);
      if (!w->peers[r])
        throw Error(fmt::format("megamoe: the nvshmem transport: rank {} cannot reach rank {} of its node by load and "
                                "store (nvshmem_ptr is null); RuntimeOptions.node_size = {} ({}): set it to the "
                                "ranks a node that NVSHMEM maps to each other",
                                o.rank, r, o.node_size, o.node_size ? "as given" : "0, the whole group"));
    }
  if (shmem)  // the other transports map their peers after creation (connect_ipc_peers, create_ranks)
    for (int r = 0; r < o.world; ++r) w->remote += w->peers[r] == nullptr;
  w->clear();
  return w;
}

std::size_t EpWorkspace::plan_bytes() const {
  std::size_t n = 0;
  for (const DeviceBuffer* b :
       {&state, &dest_row, &slot_rank, &segment, &segment_rows, &ready, &block_counts, &gateway_rows, &forwarded})
    n += b->bytes();
  return n;
}

EpWorkspace::~EpWorkspace() {
  for (void* p : opened) device->close_ipc_handle(p);
}

void EpWorkspace::clear() {
  device->fill_bytes(state.get(), 0, state.bytes());
  device->fill_bytes(region->get(), 0, layout.flags_end);
  // A relay row holds the call sequence it was sent in: none of before may pass for a later call's;
  // and no slot map entry of before names a rank or a row (NVSHMEM's heap starts uninitialised).
  if (layout.relay_meta_at)
    device->fill_bytes(static_cast<u8*>(region->get()) + layout.relay_meta_at, 0,
                       layout.partials_at - layout.relay_meta_at);
  if (forwarded.get()) device->fill_bytes(forwarded.get(), 0, forwarded.bytes());
}

EpArgs EpWorkspace::args(ErrorWords errors, int timeout_ms) const {
  EpArgs a{};
  for (int r = 0; r < world; ++r) a.peers[r] = static_cast<u8*>(peers[r]);
  a.rank = rank, a.world = world, a.experts = experts, a.max_tokens = max_tokens;
  a.topk = topk, a.model_dim = model_dim, a.x_block = x_block;
  a.state = static_cast<u32*>(state.get());
  a.errors = errors;
  a.timeout_ns = u64(timeout_ms) * 1000000ull;
  a.counts_at = layout.counts_at, a.count_flags_at = layout.count_flags_at;
  a.arrive_flags_at = layout.arrive_flags_at, a.done_flags_at = layout.done_flags_at;
  a.recv_x_at = layout.recv_x_at, a.recv_scales_at = layout.recv_scales_at, a.recv_meta_at = layout.recv_meta_at;
  a.wire_at = layout.wire_at, a.wire_scales_at = layout.wire_scales_at;
  a.remote = remote;
  a.stage_counts_at = layout.stage_counts_at, a.stage_x_at = layout.stage_x_at;
  a.stage_scales_at = layout.stage_scales_at, a.stage_relay_at = layout.stage_relay_at;
  a.outbox_at = layout.outbox_at, a.outbox_scales_at = layout.outbox_scales_at;
  a.stage_partials_at = layout.stage_partials_at;
  a.node_size = node_size, a.node_first = node_first;
  a.fwd_flags_at = layout.fwd_flags_at, a.node_done_flags_at = layout.node_done_flags_at;
  a.relay_meta_at = layout.relay_meta_at, a.slot_map_at = layout.slot_map_at, a.partials_at = layout.partials_at;
  a.gateway_rows = static_cast<int*>(gateway_rows.get());
  a.forwarded = static_cast<int*>(forwarded.get());
  a.dest_row = static_cast<int*>(dest_row.get());
  a.slot_rank = static_cast<int*>(slot_rank.get());
  a.segment = static_cast<int*>(segment.get());
  a.segment_rows = static_cast<int*>(segment_rows.get());
  a.ready = static_cast<int*>(ready.get());
  return a;
}

}  // namespace megamoe
