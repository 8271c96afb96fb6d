// Stage1 on Hopper (wgmma, warp-specialised; moe/wgmma_gemm.cuh): per expert token tile and 128
// interleaved gate/up weight rows (64 columns of inter_dim), h = act(gate, up) with the rows'
// scales applied, then h in fp8 blocks of 64 columns, written routed (moe/routed_rows.cuh) for
// Stage2. x comes routed from dispatch. A persistent grid walks the tiles routing laid out.
#pragma once
#include "common/activation.cuh"
#include "moe/route.cuh"
#include "moe/routed_rows.cuh"
#include "moe/wgmma_gemm.cuh"

namespace megamoe {

template <class Act, int BN, int kStages, int kBlocksPerSM, bool kCheck>
MM_DEVICE void stage1_wgmma(const u8* x_q, const float* x_scales, const int* expert_offsets, const int* tile_offsets,
                            const int* row_token, const u8* w1_words, const signed char* w1_exps,
                            const float* w1_row_scale, int experts, int model_dim, int inter_dim, u8* h_q,
                            float* h_scales, int rows_pad, int rows_capacity, int tokens, int* errors) {
  using Gemm = WgmmaGemm<BN, kStages, kBlocksPerSM>;
  extern __shared__ u8 smem_raw[];
  __shared__ int a_rows[BN];  // tile_rows' row of x per column: unused, x comes routed
  int* scratch = a_rows;  // the lambdas below capture by value: a pointer, not the array
  u8* smem = Gemm::align(smem_raw);
  Gemm::init(smem);
  const i64 rows_e = 2LL * inter_dim;
  const TileWalk walk{tile_offsets[experts] * int(rows_e / Gemm::kRows), int(rows_e / Gemm::kRows), tile_offsets,
                      expert_offsets, experts};
  if (threadIdx.x < Gemm::kProducers) {
    Gemm::run_producer(smem, walk, x_q, x_scales, rows_pad, model_dim, w1_words, w1_exps, rows_e * model_dim / 2,
                       rows_e * (model_dim / 32), [=](const RoutedTile& rt, TileInfo<BN>* ti, int ptid) {
                         stage1_tile_rows<BN, Gemm::kProducers, kCheck>(rt, row_token, rows_capacity, tokens, errors,
                                                                        scratch, ti->out, ptid);
                       });
    return;
  }
  float* h = Gemm::region(smem);  // [BN][65]: the tile's h before quantization
  Gemm::run_consumers(smem, walk.total, model_dim, [=](const TileInfo<BN>& ti, float (&acc)[Gemm::NT][4], int ctid) {
    const int warp = ctid >> 5, lane = ctid & 31, g = lane >> 2, t = lane & 3;
    // Row g of the warp's slab is gate column 8 * slab + g, row g + 8 its up.
    const int slab = ti.col_tile * 8 + warp;
    const float* row_scale = w1_row_scale + ti.expert * rows_e + slab * 16;
    const float sg = row_scale[g], su = row_scale[g + 8];
    named_barrier(2, Gemm::kConsumers);  // the previous tile's store is done with h
    for (int j = 0; j < Gemm::NT; ++j)
      for (int c = 0; c < 2; ++c)
        h[(8 * j + 2 * t + c) * 65 + 8 * warp + g] = Act::apply(acc[j][c] * sg, acc[j][2 + c] * su);
    named_barrier(2, Gemm::kConsumers);
    // A half warp per tile row: the 64 columns are half of Stage2's chunk col_tile / 2.
    for (int r0 = 0; r0 < BN; r0 += Gemm::kConsumers / 16) {
      const int n = r0 + ctid / 16, half = ctid & 15;
      const int out = n < BN ? ti.out[n] : -1;
      float v[4] = {0.f, 0.f, 0.f, 0.f};
      if (n < BN)
        for (int j = 0; j < 4; ++j) v[j] = h[n * 65 + half * 4 + j];
      store_routed_half(v, half, ti.col_tile & 1, ti.col_tile / 2, out, n & 7, rows_pad, h_q, h_scales);
    }
  });
}

}  // namespace megamoe
