// The Hopper expert GEMM of both stages: the shared pipeline (moe/hopper_pipeline.cuh) around the
// main loop of the weights' form (moe/hopper_mxfp4_loop.cuh, moe/hopper_fp8_ss_loop.cuh).
#pragma once
#include "moe/hopper_fp8_ss_loop.cuh"
#include "moe/hopper_mxfp4_loop.cuh"
#include "moe/hopper_pipeline.cuh"

namespace megamoe {

// BM: the token tile (wgmma's N: the weights are the A operand, 128 x kGroups rows a block).
// MainLoop: HopperMxfp4Loop or HopperFp8SsLoop.
template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups,
          template <int, int, int, int, int> class MainLoop>
using HopperGemm = HopperPipeline<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups,
                                  MainLoop<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups>>;

// The loop by the kernels' flag for their weights (the host renders it; name part fp8res):
// fp8-resident weights read from shared memory, or MXFP4 converted in registers.
template <bool kResident>
struct HopperLoopOf {
  template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups>
  using Loop = HopperMxfp4Loop<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups>;
};
template <>
struct HopperLoopOf<true> {
  template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups>
  using Loop = HopperFp8SsLoop<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups>;
};
template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups, bool kResident>
using HopperGemmOf =
    HopperGemm<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups, HopperLoopOf<kResident>::template Loop>;

}  // namespace megamoe
