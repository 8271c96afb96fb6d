// The symmetric region of a rank of an expert-parallel group: the buffers peers write into, at
// the same offsets on every rank (docs/ep.md gives their sizes for Kimi-K3 EP8).
#pragma once
#include <cstddef>
#include <cstdint>

namespace megamoe {

struct SymmetricLayout {
  std::uint64_t counts_at = 0, count_flags_at = 0, arrive_flags_at = 0, done_flags_at = 0;
  std::uint64_t recv_x_at = 0, recv_scales_at = 0, recv_meta_at = 0, wire_at = 0, wire_scales_at = 0;
  std::uint64_t flags_end = 0;  // the counts and the flags end here (what recover() clears)
  // The nvshmem transport only (docs/ep.md, "Over nodes: NVSHMEM"). In the flags: per (source,
  // gateway) its rows forwarded, and per rank of the node its Stage2 rows in its outbox.
  std::uint64_t fwd_flags_at = 0, node_done_flags_at = 0;
  // What a gateway receives (a source's relay metadata, the slot map its node fills, the partial
  // sums other nodes' gateways send home), and what this rank puts from (a put's source is in the
  // symmetric heap): its counts for each rank, each token's x and scales once, its relay metadata
  // for each node, Stage2's rows of other nodes' tokens by routed row, and a node's summed rows.
  std::uint64_t relay_meta_at = 0, slot_map_at = 0, partials_at = 0;
  std::uint64_t stage_counts_at = 0, stage_x_at = 0, stage_scales_at = 0, stage_relay_at = 0;
  std::uint64_t outbox_at = 0, outbox_scales_at = 0, stage_partials_at = 0;
  std::uint64_t bytes = 0;
};

// For `world` ranks of `experts` experts each, max_tokens tokens a call, x in scale blocks of
// x_block on the dispatch wire; the wire sized for bf16 (the wider) with the fp8 wire's scales.
// outbox_rows >= 0 (the nvshmem transport: the routed rows a rank holds; nodes of node_size
// ranks) adds its areas.
SymmetricLayout symmetric_layout(int world, int experts, int max_tokens, int topk, int model_dim, int x_block,
                                 long long outbox_rows = -1, int node_size = 1);

}  // namespace megamoe
