// Combine over several ranks (docs/ep.md, phase 5): once every rank's done flag holds this call,
// the single-GPU combine over this rank's tokens (ids global, the wire this rank's own). The last
// block counts the call (the call sequence the next call's kernels read).
#pragma once
#include "ep/protocol.cuh"
#include "moe/combine.cuh"

namespace megamoe {

// kPartials: the nvshmem transport's build (the slots of other nodes come summed, once a node).
template <int kWire, bool kPartials = false>
MM_DEVICE void combine_ep(const CombineEpArgs& a) {
  mm_wait_prior_grid();
  mm_release_dependents();
  const EpArgs& ep = a.ep;
  const u32 seq = ep_call_seq(ep);
  __shared__ int arrived;
  if (threadIdx.x == 0) arrived = 1;
  __syncthreads();
  const int r = threadIdx.x;
  if (r < ep.world && !ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.done_flags_at) + r, seq, kEpPhaseOutputs, r))
    arrived = 0;
  __syncthreads();
  if (arrived) combine<kWire, kPartials>(a.combine);
  if (ep_last_block(ep.state + kStateCombineDone, gridDim.x) && threadIdx.x == 0 && !ep_aborted(ep))
    atomicExch(ep.state + kStateCallSeq, seq);
}

}  // namespace megamoe
