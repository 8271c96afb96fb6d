// Stage2 on Hopper (wgmma, warp-specialised; moe/wgmma_gemm.cuh): per expert token tile and 128
// rows of W2 (128 columns of model_dim), o = W2 h with the rows' scales, times the route weight,
// onto the combine wire at the row's slot: bf16 (kWire 0) or fp8 1x32 blocks (kWire 1). h comes
// routed from Stage1 (moe/routed_rows.cuh).
#pragma once
#include "moe/portable_gemm.cuh"
#include "moe/route.cuh"
#include "moe/wgmma_gemm.cuh"

namespace megamoe {

template <int BN, int kStages, int kBlocksPerSM, int kWire, bool kCheck>
MM_DEVICE void stage2_wgmma(const u8* h_q, const float* h_scales, const int* expert_offsets, const int* tile_offsets,
                            const int* row_slot, const float* row_weight, const u8* w2_words,
                            const signed char* w2_exps, const float* w2_row_scale, int experts, int model_dim,
                            int inter_dim, void* wire, u8* wire_scales, int rows_pad, int rows_capacity, int slots,
                            int* errors) {
  using Gemm = WgmmaGemm<BN, kStages, kBlocksPerSM>;
  extern __shared__ u8 smem_raw[];
  __shared__ int p_rows[BN];
  u8* smem = Gemm::align(smem_raw);
  Gemm::init(smem);
  const int m_tiles = model_dim / Gemm::kRows;
  const int total = tile_offsets[experts] * m_tiles;
  const i64 rows_e = model_dim;
  Ring<kStages> ps;
  Ring<2> ts;
  if (threadIdx.x < Gemm::kProducers) {
    regs_dealloc<Gemm::kProducerRegs>();
    const int ptid = threadIdx.x;
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x, ts.advance()) {
      mbar_wait(Gemm::tile_empty(smem, ts.index), ts.phase ^ 1);
      const RoutedTile rt = routed_tile(tile, m_tiles, BN, tile_offsets, expert_offsets, experts);
      TileInfo<BN>* ti = Gemm::info(smem, ts.index);
      named_barrier(1, Gemm::kProducers);  // p_rows is free
      stage2_tile_rows<BN, Gemm::kProducers, kCheck>(rt, row_slot, row_weight, rows_capacity, slots, errors, p_rows,
                                                     ti->out, ti->weight, ptid);
      if (ptid == 0) ti->expert = rt.expert, ti->col_tile = rt.col_tile;
      named_barrier(1, Gemm::kProducers);
      mbar_arrive(Gemm::tile_full(smem, ts.index));
      if (ptid == 0)
        Gemm::produce(smem, h_q, h_scales, rows_pad, rt.p0, inter_dim, w2_words + rt.expert * rows_e * inter_dim / 2,
                      w2_exps + rt.expert * rows_e * (inter_dim / 32), rt.col_tile * 8, ps);
    }
  } else {
    regs_alloc<Gemm::kConsumerRegs>();
    const int ctid = threadIdx.x - Gemm::kProducers, warp = ctid >> 5, lane = ctid & 31, g = lane >> 2,
              t = lane & 3;
    float* o = Gemm::region(smem);  // [BN][129]: the tile's output rows before they go on the wire
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x, ts.advance()) {
      mbar_wait(Gemm::tile_full(smem, ts.index), ts.phase);
      const TileInfo<BN>* ti = Gemm::info(smem, ts.index);
      const int expert = ti->expert, col_tile = ti->col_tile;
      float acc[Gemm::NT][4];
      Gemm::consume(smem, ctid, inter_dim, ps, acc);
      const int slab = col_tile * 8 + warp;
      const float* row_scale = w2_row_scale + expert * rows_e + slab * 16;
      const float s0 = row_scale[g], s1 = row_scale[g + 8];
      named_barrier(2, Gemm::kConsumers);  // the previous tile's store is done with o
      for (int j = 0; j < Gemm::NT; ++j)
        for (int c = 0; c < 2; ++c) {
          const int n = 8 * j + 2 * t + c;
          o[n * 129 + 16 * warp + g] = acc[j][c] * s0 * ti->weight[n];
          o[n * 129 + 16 * warp + g + 8] = acc[j][2 + c] * s1 * ti->weight[n];
        }
      named_barrier(2, Gemm::kConsumers);
      const int col0 = col_tile * Gemm::kRows;
      if (kWire == 0) {
        u16* out = static_cast<u16*>(wire);
        for (int i = ctid; i < BN * Gemm::kRows / 2; i += Gemm::kConsumers) {
          const int n = i / (Gemm::kRows / 2), c = 2 * (i % (Gemm::kRows / 2)), slot = ti->out[n];
          if (slot >= 0)
            *reinterpret_cast<u32*>(out + (i64)slot * model_dim + col0 + c) =
                u32(mm_f32_to_bf16(o[n * 129 + c])) | (u32(mm_f32_to_bf16(o[n * 129 + c + 1])) << 16);
        }
      } else {
        store_tile_fp8<BN, 128, 32, Gemm::kConsumers>(o, 129, ti->out, static_cast<u8*>(wire), model_dim,
                                                      wire_scales, model_dim / 32, col0, ctid);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(Gemm::tile_empty(smem, ts.index));
    }
  }
}

}  // namespace megamoe
