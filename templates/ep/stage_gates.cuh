// How the EP stage kernels meet the protocol around the single-GPU stages: a Stage1 tile waits
// until the rows of each (expert, source) segment it covers are laid out (dispatch_ep's readiness
// counters), and Stage2 writes each row onto its home rank's wire, after which the last block
// tells every rank that this rank's outputs are all there.
#pragma once
#include "ep/protocol.cuh"
#include "moe/routed_tiles.cuh"

namespace megamoe {

// A Stage1 tile's wait (the gate of the stage walks): requests its weights first (Hopper), then
// waits for its rows. One thread waits.
struct EpRowsGate {
  static constexpr bool kWaits = true;
  const EpArgs& ep;
  MM_DEVICE bool early(bool) const { return true; }
  MM_DEVICE void wait(const RoutedTile& rt, int rows, bool) const {
    const int W = ep.world, e = rt.expert, p1 = rt.p0 + rows;
    for (int s = 0; s < W; ++s) {
      const int begin = ep.segment[e * W + s], n = ep.segment_rows[e * W + s];
      if (n > 0 && begin < p1 && begin + n > rt.p0) ep_wait_count(ep, ep.ready + e * W + s, n, kEpPhaseLayout, s);
    }
    mm_fence_proxy_async();  // the tile's bulk copies read rows other threads stored
  }
};

// Stage1's output rows over several ranks: each routed row of the tile (its h row is its own
// index); the rows' readiness is the gate's business, so nothing of a row is read here.
template <int BM, int kThreads, bool kCheck>
MM_DEVICE void ep_stage1_rows(const RoutedTile& rt, int rows_capacity, int* errors, int* out_rows, int tid) {
  for (int n = tid; n < BM; n += kThreads) {
    const int p = rt.p0 + n;
    int out = p < rt.p_end ? p : -1;
    if (kCheck && out >= rows_capacity) {
      atomicAdd(&errors[kErrBoundsViolations], 1);
      out = -1;
    }
    out_rows[n] = out;
  }
}

// Stage2's rows over several ranks: a row's wire code is home * (max_tokens * topk) + slot; its
// row is on the home rank's wire (bf16, or e4m3 with e8m0 scales per 32).
// A code past every rank's wire (world x max_tokens x topk + p) is routed row p's row in this
// rank's outbox: its home is on another node (the nvshmem transport), where the token's gateway
// in this node sums it with the node's other slots of the token (node_reduce_ep).
template <int kWire>
struct PeerWireRows {
  const EpArgs& ep;
  MM_DEVICE u8* row(int code) const {
    const int slots = ep.max_tokens * ep.topk;
    const i64 row_bytes = (kWire == kWireBf16 ? 2 : 1) * ep.model_dim;
    if (code >= ep.world * slots) return ep_own<u8>(ep, ep.outbox_at) + (i64)(code - ep.world * slots) * row_bytes;
    return ep.peers[code / slots] + ep.wire_at + (i64)(code % slots) * row_bytes;
  }
  MM_DEVICE u8* scale_row(int code) const {
    const int slots = ep.max_tokens * ep.topk;
    if (code >= ep.world * slots)
      return ep_own<u8>(ep, ep.outbox_scales_at) + (i64)(code - ep.world * slots) * (ep.model_dim / 32);
    return ep.peers[code / slots] + ep.wire_scales_at + (i64)(code % slots) * (ep.model_dim / 32);
  }
};

// The end of Stage2 on every block: once all of this rank's Stage2 blocks are done, the last one
// sets this rank's done flag on every rank; over nodes, its node-done flag on each rank of its
// node instead (their gateways read its outbox), and node_reduce_ep sets the done flags. Every
// thread of the block calls it.
MM_DEVICE void ep_stage2_done(const EpArgs& ep) {
  if (!ep_last_block(ep.state + kStateStage2Done, gridDim.x) || ep_aborted(ep)) return;
  if (ep.remote == 0) {
    ep_signal_all(ep, ep.done_flags_at, ep_call_seq(ep));
    return;
  }
  for (int m = ep.node_first + int(threadIdx.x); m < ep.node_first + ep.node_size; m += blockDim.x)
    ep_set_flag(ep, m, ep.node_done_flags_at, ep.rank, ep_call_seq(ep));
}

}  // namespace megamoe
