// Stage2 (portable): for each expert's rows, o = W2 h over one BW-column slice of model_dim,
// times the row's route weight, written to the row's slot (t * topk + k) of the combine wire:
// bf16 (kWire 0) or fp8 1x32 blocks (kWire 1).
#pragma once
#include "interface/kernel_args.cuh"
#include "moe/epilogue_fp8.cuh"
#include "moe/stage_outputs.cuh"
#include "moe/portable_gemm.cuh"
#include "moe/routed_tiles.cuh"

namespace megamoe {

// The tiles of a grid-wide walk; each output row (a row's wire code, row_slot) goes where
// wire.row() says.
template <int BM, int BW, int kWire, bool kCheck, class Wire>
MM_DEVICE void stage2_portable_tiles(const Stage2Args& a, const Wire& wire) {
  const int model_dim = a.w2.model_dim, inter_dim = a.w2.inter_dim;
  using Gemm = PortableGemm<BM, BW, 1>;
  __shared__ union {
    typename Gemm::Smem gemm;
    float o[BM][BW + 1];
  } smem;
  __shared__ int a_rows[BM], out_slot[BM];
  __shared__ float weight[BM];
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int col_tiles = model_dim / BW;
  const int total = a.rows.tile_offsets[a.w2.experts] * col_tiles;
  for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
    const RoutedTile rt = routed_tile(tile, col_tiles, BM, a.rows.tile_offsets, a.rows.expert_offsets, a.w2.experts);
    const int e = rt.expert, col0 = rt.col_tile * BW;
    __syncthreads();  // the previous tile's epilogue is done with shared memory
    stage2_tile_rows<BM, Gemm::kThreads, kCheck>(rt, a.rows, a.slots, a.errors.words, a_rows,
                                                 out_slot, weight, threadIdx.x);
    __syncthreads();
    float acc[1][Gemm::TM][Gemm::TN];
    Gemm::run(smem.gemm, a.h_q, a.h_scales, a_rows, inter_dim, a.w2.data + (i64)e * model_dim * (inter_dim / 2),
              a.w2.block_scales + (i64)e * model_dim * (inter_dim / 32), col0, 0, acc);
    Stage2Column outs[Gemm::TN];
    for (int j = 0; j < Gemm::TN; ++j) outs[j] = stage2_column(a.w2, e, col0 + tx + 16 * j);
    if (kWire == kWireBf16) {
      for (int i = 0; i < Gemm::TM; ++i) {
        const int r = ty + 16 * i;
        if (out_slot[r] < 0) continue;
        u16* out = reinterpret_cast<u16*>(wire.row(out_slot[r])) + col0 + tx;
        for (int j = 0; j < Gemm::TN; ++j) out[16 * j] = mm_f32_to_bf16(outs[j].out(acc[0][i][j], weight[r]));
      }
    } else {
      for (int i = 0; i < Gemm::TM; ++i)
        for (int j = 0; j < Gemm::TN; ++j)
          smem.o[ty + 16 * i][tx + 16 * j] = outs[j].out(acc[0][i][j], weight[ty + 16 * i]);
      __syncthreads();
      store_tile_fp8<BM, BW, 32, Gemm::kThreads>(&smem.o[0][0], BW + 1, out_slot, wire, col0, threadIdx.x);
    }
  }
}

template <int BM, int BW, int kWire, bool kCheck>
MM_DEVICE void stage2_portable(const Stage2Args& a) {
  stage2_portable_tiles<BM, BW, kWire, kCheck>(a, wire_rows<kWire>(a.wire, a.wire_scales, a.w2.model_dim));
}

}  // namespace megamoe
