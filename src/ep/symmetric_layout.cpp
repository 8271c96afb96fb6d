#include "ep/symmetric_layout.hpp"

#include "interface/kernel_constants.cuh"

namespace megamoe {

SymmetricLayout symmetric_layout(int world, int experts, int max_tokens, int topk, int model_dim, int x_block,
                                 long long outbox_rows, int node_size) {
  SymmetricLayout l;
  std::uint64_t at = 0;
  auto take = [&](std::uint64_t bytes) {
    const std::uint64_t here = at;
    at = (at + bytes + 255) / 256 * 256;  // every buffer 256-byte aligned
    return here;
  };
  const std::uint64_t W = world, E = experts, T = max_tokens, K = topk, D = model_dim;
  const bool shmem = outbox_rows >= 0;
  l.counts_at = take(2 * W * (E + 1) * 4);
  l.count_flags_at = take(2 * W * 4);
  l.arrive_flags_at = take(W * 4);
  l.done_flags_at = take(W * 4);
  if (shmem) {
    l.fwd_flags_at = take(W * W * 4);
    l.node_done_flags_at = take(W * 4);
  }
  l.flags_end = at;
  l.recv_x_at = take(W * T * D);
  l.recv_scales_at = take(W * T * (D / x_block));
  l.recv_meta_at = take(W * T * std::uint64_t(ep_meta_bytes(topk)));
  l.wire_at = take(T * K * D * 2);
  l.wire_scales_at = take(T * K * (D / 32));
  if (shmem) {
    const std::uint64_t R = std::uint64_t(outbox_rows), N = std::uint64_t(node_size), nodes = (W + N - 1) / N;
    const std::uint64_t relay = std::uint64_t(ep_relay_bytes(topk, node_size));
    l.relay_meta_at = take(W * T * relay);
    l.slot_map_at = take(W * T * K * 8);
    l.partials_at = take(nodes * T * D * 2);
    l.stage_counts_at = take(W * (E + 1) * 4);
    l.stage_x_at = take(T * D);
    l.stage_scales_at = take(T * (D / x_block));
    l.stage_relay_at = take(nodes * T * relay);
    l.outbox_at = take(R * D * 2);
    l.outbox_scales_at = take(R * (D / 32));
    l.stage_partials_at = take(std::uint64_t(kNodeReduceMaxWarps) * D * 2);
  }
  l.bytes = at;
  return l;
}

}  // namespace megamoe
