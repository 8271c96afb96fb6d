// The Hopper path's stages over several ranks. Stage1: the first dispatch.blocks blocks (whole
// clusters) run the dispatch with x laid out into the routed layout, then, unless persistent,
// take Stage1 tiles too; a tile's producer requests the tile's first weights, then waits until the
// rows of each (expert, source) segment the tile covers are laid out. Stage2: once Stage1 has
// finished, the single-GPU Stage2, each row onto its home rank's wire, then the done signal.
#pragma once
#include "ep/dispatch_ep.cuh"
#include "ep/stage_gates.cuh"
#include "moe/stage1_hopper.cuh"
#include "moe/stage2_hopper.cuh"

namespace megamoe {

template <class Act, int BM, int kStages, int kBlocksPerSM, int kGroups, int kXBlock, bool kHStatic, int kHExponent,
          int kSharedBytes, bool kCheck, bool kResident>
MM_DEVICE void stage1_hopper_ep(const Stage1HopperEpArgs& a) {
  using Gemm = HopperGemmOf<BM, kStages, kBlocksPerSM, hopper_x_scale_chunks(kXBlock), kGroups, kResident>;
  constexpr bool kPaired = !kHStatic && kGroups == 1;
  static_assert(1023 + Gemm::kPipelineBytes + BM * hopper_region_ld(1, kGroups) * 4 <= kSharedBytes,
                "the launch's shared memory holds the alignment slack, the stages and the region");
  extern __shared__ u8 smem_raw[];
  __shared__ Stage1PairShared<BM> pair;
  u8* smem = pair.template init<Gemm, kPaired>(smem_raw);
  mm_wait_prior_grid();
  mm_release_dependents();
  const int dispatchers = a.dispatch.blocks, block = int(blockIdx.x);
  if (block < dispatchers) ep_dispatch_block<kXBlock, true, kCheck>(a.ep, a.dispatch, ep_call_seq(a.ep));
  if (!(a.dispatch.persistent && block < dispatchers)) {
    const int skip = a.dispatch.persistent ? dispatchers : 0;  // whole clusters: the walk keeps a cluster's tiles in pairs
    const Stage1HopperArgs& s = a.stage;
    stage1_hopper_walk<Act, Gemm, kHStatic, kHExponent, kCheck>(
        s, smem, &pair, stage1_hopper_tiles<Gemm>(s, block - skip, int(gridDim.x) - skip),
        [=](const RoutedTile& rt, TileInfo<BM>* ti, int stid) {
          ep_stage1_rows<BM, Gemm::kFillers, kCheck>(rt, s.rows.rows_capacity, s.errors.words, ti->out, stid);
        },
        EpRowsGate{a.ep});
  }
  Stage1PairShared<BM>::template finish<kPaired>();
}

template <int BM, int kStages, int kBlocksPerSM, int kGroups, bool kHStatic, int kHExponent, int kSharedBytes,
          int kWire, bool kCheck, bool kResident>
MM_DEVICE void stage2_hopper_ep(const Stage2HopperEpArgs& a) {
  using Gemm = HopperGemmOf<BM, kStages, kBlocksPerSM, kHStatic ? int(kScaleStatic) : 1, kGroups, kResident>;
  static_assert(1023 + Gemm::kPipelineBytes + BM * hopper_region_ld(2, kGroups) * 4 <= kSharedBytes,
                "the launch's shared memory holds the alignment slack, the stages and the region");
  extern __shared__ u8 smem_raw[];
  u8* smem = Gemm::align(smem_raw);
  Gemm::init(smem);
  // Stage1's dispatch wrote the rows' slots and weights, which the producers read for a block's
  // first tile before the single-GPU walk waits; and a block with no tile must not signal done early.
  mm_wait_prior_grid();
  mm_release_dependents();
  stage2_hopper_walk<Gemm, kHStatic, kHExponent, kWire, kCheck>(a.stage, smem, PeerWireRows<kWire>{a.ep});
  ep_stage2_done(a.ep);
}

}  // namespace megamoe
