// Stage1 (portable): for each expert's rows, h = act(W1gate x, W1up x) over one BW-column slice
// of inter_dim, then h in fp8 1x32 blocks. A persistent grid walks the tiles (expert row tile x
// column tile) that routing laid out.
#pragma once
#include "common/activation.cuh"
#include "interface/kernel_args.cuh"
#include "moe/epilogue_fp8.cuh"
#include "moe/stage_outputs.cuh"
#include "moe/portable_gemm.cuh"
#include "moe/routed_tiles.cuh"
#include "moe/stage_gate.cuh"

namespace megamoe {

// The tiles first, first + step, ...; a tile's rows are read once gate.wait returns (one thread
// waits; ep/stage_gates.cuh).
template <class Act, int BM, int BW, bool kCheck, class Gate>
MM_DEVICE void stage1_portable_tiles(const Stage1Args& a, int first, int step, const Gate& gate) {
  const int model_dim = a.w1.model_dim, inter_dim = a.w1.inter_dim;
  using Gemm = PortableGemm<BM, BW, 2>;
  __shared__ union {
    typename Gemm::Smem gemm;
    float h[BM][BW + 1];
  } smem;
  __shared__ int a_rows[BM], out_rows[BM];
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int col_tiles = inter_dim / BW;
  const int total = a.rows.tile_offsets[a.w1.experts] * col_tiles;
  for (int tile = first; tile < total; tile += step) {
    const RoutedTile rt = routed_tile(tile, col_tiles, BM, a.rows.tile_offsets, a.rows.expert_offsets, a.w1.experts);
    const int e = rt.expert, col0 = rt.col_tile * BW;
    if constexpr (Gate::kWaits)
      if (tid == 0) gate.wait(rt, min(rt.p_end - rt.p0, BM), tile == first);
    __syncthreads();  // the previous tile's epilogue is done with shared memory (and the rows are there)
    stage1_tile_rows<BM, Gemm::kThreads, kCheck>(rt, a.rows, a.tokens, a.errors.words, a_rows, out_rows, threadIdx.x);
    __syncthreads();
    float acc[2][Gemm::TM][Gemm::TN];
    Gemm::run(smem.gemm, a.x_q, a.x_scales, a_rows, model_dim, a.w1.data + (i64)e * inter_dim * model_dim,
              a.w1.block_scales + (i64)e * 2 * inter_dim * (model_dim / 32), col0, inter_dim, acc);
    for (int j = 0; j < Gemm::TN; ++j) {
      const int col = col0 + tx + 16 * j;
      const Stage1Column out = stage1_column(a.w1, e, col);
      for (int i = 0; i < Gemm::TM; ++i) smem.h[ty + 16 * i][col - col0] = out.h<Act>(acc[0][i][j], acc[1][i][j]);
    }
    __syncthreads();
    store_tile_fp8<BM, BW, 32, Gemm::kThreads>(&smem.h[0][0], BW + 1, out_rows,
                                               DenseRows{a.h_q, inter_dim, a.h_scales, inter_dim / 32}, col0, tid);
  }
}

template <class Act, int BM, int BW, bool kCheck>
MM_DEVICE void stage1_portable(const Stage1Args& a) {
  stage1_portable_tiles<Act, BM, BW, kCheck>(a, int(blockIdx.x), int(gridDim.x), NoRowsGate{});
}

}  // namespace megamoe
