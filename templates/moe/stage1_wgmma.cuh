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
  using Gemm = WgmmaGemm<BN, kStages, kBlocksPerSM, 1>;  // x: one scale per 128 k
  extern __shared__ u8 smem_raw[];
  __shared__ int a_rows[BN];  // tile_rows' row of x per column: unused, x comes routed
  int* scratch = a_rows;  // the lambdas below capture by value: a pointer, not the array
  u8* smem = Gemm::align(smem_raw);
  Gemm::init(smem);
  const i64 rows_e = 2LL * inter_dim;
  const TileWalk walk{tile_offsets[experts] * int(rows_e / Gemm::kRows), int(rows_e / Gemm::kRows), tile_offsets,
                      expert_offsets, experts};
  // The output region: [BN][129] floats, the tile's gate and up sums with the rows' scales applied
  // (row g of a warp's slab is gate column 8 * slab + g, row g + 8 its up, at 16 * warp + g and + 8).
  constexpr int kLd = 129;
  if (threadIdx.x < Gemm::kProducers) {
    Gemm::run_producer(
        smem, walk, x_q, x_scales, rows_pad, model_dim, w1_words, w1_exps, rows_e * model_dim / 2,
        rows_e * (model_dim / 32),
        [=](const RoutedTile& rt, TileInfo<BN>* ti, int lane) {
          stage1_tile_rows<BN, Gemm::kFillers, kCheck>(rt, row_token, rows_capacity, tokens, errors, scratch, ti->out,
                                                       lane);
        },
        [=](const TileInfo<BN>& ti, const float* o, int stid) {
          // A half warp per tile row, two rows at a time where registers allow (their shuffles and
          // stores overlap): h = act(gate, up) for the tile's 64 columns, half of Stage2's chunk
          // col_tile / 2, quantized as one block and stored routed.
          constexpr int kHalves = Gemm::kStorers / 16;
          const int half = stid & 15;
          auto activate = [&](int n, float (&v)[4]) {
            const int out = n < BN ? ti.out[n] : -1;
            for (int j = 0; j < 4; ++j) v[j] = 0.f;
            if (out >= 0)
              for (int j = 0; j < 4; ++j) {
                const int c = half * 4 + j;  // h column of the tile
                const float* row = o + n * kLd + 16 * (c / 8) + c % 8;
                v[j] = Act::apply(row[0], row[8]);
              }
            return out;
          };
          // With two blocks per SM the storers have 32 registers: one row at a time.
          constexpr int kRowsPerPass = kBlocksPerSM == 1 ? 2 : 1;
#pragma unroll 1
          for (int r0 = 0; r0 < ti.rows; r0 += kRowsPerPass * kHalves) {
            float v[kRowsPerPass][4];
            int out[kRowsPerPass];
            for (int i = 0; i < kRowsPerPass; ++i) out[i] = activate(r0 + i * kHalves + stid / 16, v[i]);
            for (int i = 0; i < kRowsPerPass; ++i) {
              const int n = r0 + i * kHalves + stid / 16;
              store_routed_half(v[i], half, ti.col_tile & 1, ti.col_tile / 2, out[i], n & 7, rows_pad, h_q, h_scales);
            }
          }
        });
    return;
  }
  Gemm::run_consumers(smem, walk.total, model_dim,
                      [=](const TileInfo<BN>& ti, float (&acc)[Gemm::NT][4], int ctid, float* o) {
                        Gemm::stash_rows(acc, w1_row_scale + ti.expert * rows_e, ti.col_tile, o, kLd, ctid,
                                         [](int) { return 1.f; });
                      });
}

}  // namespace megamoe
