// The nvshmem transport's last step before combine over nodes (docs/ep.md, "Node-aware dispatch
// and combine"): once every rank of this node has its Stage2 rows of other nodes' tokens in its
// outbox (their node-done flags), a warp per row this rank was the gateway of sums the token's
// slots served in this node, in k order and in fp32 (each from the outbox of the rank that served
// it, through the slot map), rounds the sum to bf16 and puts it home as the node's one row; then,
// once every block's puts have landed, the last block sets this rank's done flag on every rank
// (Stage2 leaves it to this launch).
#pragma once
#include "ep/protocol.cuh"
#include "moe/combine.cuh"

namespace megamoe {

// Gateway row `entry` (source x max_tokens + row) summed and put home, by one warp; `stage` is
// the warp's own row of staging.
template <int kWire>
MM_DEVICE void ep_reduce_row(const EpArgs& ep, int rows_capacity, int entry, u16* stage, int lane) {
  const int K = ep.topk, D = ep.model_dim, T = ep.max_tokens;
  const int s = entry / T, j = entry % T;
  if (s < 0 || s >= ep.world || !ep_remote(ep, s)) return;
  const u8* relay = ep_own<const u8>(ep, ep.relay_meta_at) + (i64)entry * ep_relay_bytes(K, ep.node_size);
  const int t = reinterpret_cast<const int*>(relay)[0];
  if (t < 0 || t >= T) return;
  const i64 row_bytes = (kWire == kWireBf16 ? 2 : 1) * D;
  // Slot k's outbox row in this node (rank, row), checked, or none (lane k % 32 holds it).
  auto slot = [&](int k, int& m, int& p) {
    m = -1, p = -1;
    if (k >= K || relay[ep_relay_ranks_at(K) + k] >= ep.node_size) return;  // kNoNodeRank, or a bad byte
    const int* at = ep_own<const int>(ep, ep.slot_map_at) + ((i64)entry * K + k) * 2;
    m = at[0], p = at[1];
    if (m != ep.node_first + relay[ep_relay_ranks_at(K) + k] || p < 0 || p >= rows_capacity) m = -1;
  };
  int m_lane, p_lane;
  slot(lane, m_lane, p_lane);
  for (int c = lane * 8; c - lane * 8 < D; c += MEGAMOE_WARP_SIZE * 8) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += MEGAMOE_WARP_SIZE) {
      int m_k = m_lane, p_k = p_lane;
      if (k0 > 0) slot(k0 + lane, m_k, p_k);
      for (int i = 0; i < MEGAMOE_WARP_SIZE && k0 + i < K; ++i) {  // in k order
        const int mi = mm_shfl(m_k, i), pi = mm_shfl(p_k, i);
        if (mi < 0 || c >= D) continue;
        const u8* row = ep.peers[mi] + ep.outbox_at + (i64)pi * row_bytes;
        uint4 raw;
        u8 scale = 0;
        if (kWire == kWireBf16) {
          raw = *reinterpret_cast<const uint4*>(row + (i64)c * 2);
        } else {
          const uint2 v = *reinterpret_cast<const uint2*>(row + c);
          raw = make_uint4(v.x, v.y, 0, 0);
          scale = (ep.peers[mi] + ep.outbox_scales_at)[(i64)pi * (D / 32) + c / 32];
        }
        combine_add8<kWire>(raw, scale, acc);
      }
    }
    if (c >= D) continue;
    u32 out[4];
    for (int i = 0; i < 4; ++i) out[i] = u32(mm_f32_to_bf16(acc[2 * i])) | u32(mm_f32_to_bf16(acc[2 * i + 1])) << 16;
    *reinterpret_cast<uint4*>(stage + c) = make_uint4(out[0], out[1], out[2], out[3]);
  }
  const int node = ep.node_first / ep.node_size;
  ep_put_warp(ep, s, ep.partials_at + ((i64)node * T + t) * D * 2, stage, u64(D) * 2, /*blocking=*/true);
}

template <int kWire>
MM_DEVICE void node_reduce_ep(const NodeReduceEpArgs& a) {
  mm_wait_prior_grid();  // Stage2's rows are all written
  mm_release_dependents();
  const EpArgs& ep = a.ep;
  const u32 seq = ep_call_seq(ep);
  const int warps = int(blockDim.x) / MEGAMOE_WARP_SIZE, lane = threadIdx.x % MEGAMOE_WARP_SIZE;
  const int worker = int(blockIdx.x) * warps + int(threadIdx.x) / MEGAMOE_WARP_SIZE, workers = int(gridDim.x) * warps;
  __shared__ int ready;
  if (threadIdx.x == 0) {
    ready = 1;
    for (int m = ep.node_first; m < ep.node_first + ep.node_size && ready; ++m)
      ready = ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.node_done_flags_at) + m, seq, kEpPhaseOutputs, m);
  }
  __syncthreads();
  const int rows = min(int(mm_load_volatile(ep.state + kStateGateways)), ep.world * ep.max_tokens);
  u16* stage = ep_own<u16>(ep, ep.stage_partials_at) + (i64)worker * ep.model_dim;
  if (ready && !ep_aborted(ep) && worker < kNodeReduceMaxWarps)
    for (int i = worker; i < rows; i += workers) ep_reduce_row<kWire>(ep, a.rows_capacity, ep.gateway_rows[i], stage, lane);
  ep_quiet(ep);
  if (ep_last_block(ep.state + kStateReduceDone, gridDim.x)) {
    if (threadIdx.x == 0) atomicExch(ep.state + kStateGateways, 0u);
    if (!ep_aborted(ep)) ep_signal_all(ep, ep.done_flags_at, seq);
  }
}

}  // namespace megamoe
