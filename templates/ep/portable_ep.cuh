// The portable path's stages over several ranks: Stage1 = dispatch (its first blocks) + the
// single-GPU Stage1 over the received rows, a tile once its rows are laid out; Stage2 = the
// single-GPU Stage2, each row onto its home rank's wire, then the done signal.
#pragma once
#include "ep/dispatch_ep.cuh"
#include "ep/stage_gates.cuh"
#include "moe/stage1_portable.cuh"
#include "moe/stage2_portable.cuh"

namespace megamoe {

template <class Act, int BM, int BW, bool kCheck>
MM_DEVICE void stage1_portable_ep(const Stage1EpArgs& a) {
  mm_wait_prior_grid();
  mm_release_dependents();
  const int dispatchers = a.dispatch.blocks, block = int(blockIdx.x);
  if (block < dispatchers) ep_dispatch_block<32, false, kCheck>(a.ep, a.dispatch, ep_call_seq(a.ep));
  if (a.dispatch.persistent && block < dispatchers) return;
  const int skip = a.dispatch.persistent ? dispatchers : 0;
  stage1_portable_tiles<Act, BM, BW, kCheck>(a.stage, block - skip, int(gridDim.x) - skip, EpRowsGate{a.ep});
}

template <int BM, int BW, int kWire, bool kCheck>
MM_DEVICE void stage2_portable_ep(const Stage2EpArgs& a) {
  mm_wait_prior_grid();
  mm_release_dependents();
  stage2_portable_tiles<BM, BW, kWire, kCheck>(a.stage, PeerWireRows<kWire>{a.ep});
  ep_stage2_done(a.ep);
}

}  // namespace megamoe
