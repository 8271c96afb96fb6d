// The tensor-core path's stages over several ranks, as the portable path's (ep/portable_ep.cuh).
#pragma once
#include "ep/dispatch_ep.cuh"
#include "ep/stage_gates.cuh"
#include "moe/stage1_tensor_core.cuh"
#include "moe/stage2_tensor_core.cuh"

namespace megamoe {

template <class Act, int BM, int kStages, bool kCheck>
MM_DEVICE void stage1_tensor_core_ep(const Stage1EpArgs& a) {
  mm_wait_prior_grid();
  mm_release_dependents();
  const int dispatchers = a.dispatch.blocks, block = int(blockIdx.x);
  if (block < dispatchers) ep_dispatch_block<kTensorCoreScaleBlock, false, kCheck>(a.ep, a.dispatch, ep_call_seq(a.ep));
  if (a.dispatch.persistent && block < dispatchers) return;
  const int skip = a.dispatch.persistent ? dispatchers : 0;
  stage1_tensor_core_tiles<Act, BM, kStages, kCheck>(a.stage, block - skip, int(gridDim.x) - skip, EpRowsGate{a.ep});
}

template <int BM, int kStages, int kWire, bool kCheck>
MM_DEVICE void stage2_tensor_core_ep(const Stage2EpArgs& a) {
  mm_wait_prior_grid();
  mm_release_dependents();
  stage2_tensor_core_tiles<BM, kStages, kWire, kCheck>(a.stage, PeerWireRows<kWire>{a.ep});
  ep_stage2_done(a.ep);
}

}  // namespace megamoe
