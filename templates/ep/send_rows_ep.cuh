// The nvshmem transport's last step before combine (docs/ep.md, "Over nodes: NVSHMEM"): Stage2
// wrote the routed rows whose home is on another node into this rank's outbox (PeerWireRows);
// here a warp a row puts each to its home's wire at its slot, then, once every block's puts have
// landed, the last block sets this rank's done flag on every rank (Stage2 leaves it to this launch).
#pragma once
#include "ep/protocol.cuh"

namespace megamoe {

template <int kWire>
MM_DEVICE void send_rows_ep(const SendRowsEpArgs& a) {
  mm_wait_prior_grid();  // Stage2's rows are all written
  mm_release_dependents();
  const EpArgs& ep = a.ep;
  const int warps = int(blockDim.x) / MEGAMOE_WARP_SIZE, lane = threadIdx.x % MEGAMOE_WARP_SIZE;
  const int worker = int(blockIdx.x) * warps + int(threadIdx.x) / MEGAMOE_WARP_SIZE, workers = int(gridDim.x) * warps;
  const int slots = ep.max_tokens * ep.topk, rows = min(a.expert_offsets[ep.experts], a.rows_capacity);
  const i64 row_bytes = (kWire == kWireBf16 ? 2 : 1) * ep.model_dim, scale_bytes = ep.model_dim / 32;
  if (!ep_aborted(ep))
    for (int p = worker; p < rows; p += workers) {
      if (a.row_slot[p] < ep.world * slots) continue;  // its home in reach: Stage2 wrote it there
      const int code = ep.outbox_home[p], home = code / slots, slot = code % slots;
      if (home < 0 || home >= ep.world) continue;  // set by this rank's dispatch; checked all the same
      ep_put_warp(ep, home, ep.wire_at + (i64)slot * row_bytes, ep_own<u8>(ep, ep.outbox_at) + (i64)p * row_bytes,
                  u64(row_bytes));
      if (kWire != kWireBf16)
        ep_put_warp(ep, home, ep.wire_scales_at + (i64)slot * scale_bytes,
                    ep_own<u8>(ep, ep.outbox_scales_at) + (i64)p * scale_bytes, u64(scale_bytes));
    }
  ep_quiet(ep);
  if (ep_last_block(ep.state + kStateSendDone, gridDim.x) && !ep_aborted(ep))
    ep_signal_all(ep, ep.done_flags_at, ep_call_seq(ep));
}

}  // namespace megamoe
