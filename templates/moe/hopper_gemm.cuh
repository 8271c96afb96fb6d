// The Hopper expert GEMM of both stages: the shared pipeline (moe/hopper_pipeline.cuh) around the
// main loop of the weights' form (moe/hopper_mxfp4_loop.cuh, moe/hopper_fp8_ss_loop.cuh).
#pragma once
#include "moe/hopper_fp8_ss_loop.cuh"
#include "moe/hopper_mxfp4_loop.cuh"
#include "moe/hopper_pipeline.cuh"

namespace megamoe {

// MainLoop: HopperMxfp4Loop or HopperFp8SsLoop.
template <int BN, int kStages, int kBlocksPerSM, int kScaleChunks, template <int, int, int, int> class MainLoop>
using HopperGemm = HopperPipeline<BN, kStages, kBlocksPerSM, kScaleChunks, MainLoop<BN, kStages, kBlocksPerSM, kScaleChunks>>;

// The loop by the kernels' flag for their weights (the host renders it; name part fp8res):
// fp8-resident weights read from shared memory, or MXFP4 converted in registers.
template <bool kResident>
struct HopperLoopOf {
  template <int BN, int kStages, int kBlocksPerSM, int kScaleChunks>
  using Loop = HopperMxfp4Loop<BN, kStages, kBlocksPerSM, kScaleChunks>;
};
template <>
struct HopperLoopOf<true> {
  template <int BN, int kStages, int kBlocksPerSM, int kScaleChunks>
  using Loop = HopperFp8SsLoop<BN, kStages, kBlocksPerSM, kScaleChunks>;
};
template <int BN, int kStages, int kBlocksPerSM, int kScaleChunks, bool kResident>
using HopperGemmOf = HopperGemm<BN, kStages, kBlocksPerSM, kScaleChunks, HopperLoopOf<kResident>::template Loop>;

}  // namespace megamoe
