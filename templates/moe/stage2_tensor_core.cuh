// Stage2 on tensor cores: per expert token tile and 128 rows of W2 (128 columns of model_dim),
// o = W2 h with the rows' scales, times the route weight, onto the combine wire at the row's slot:
// bf16 (kWire 0) or fp8 1x32 blocks (kWire 1).
#pragma once
#include "interface/kernel_args.cuh"
#include "moe/epilogue_fp8.cuh"
#include "moe/stage_outputs.cuh"
#include "moe/routed_tiles.cuh"
#include "moe/tensor_core_gemm.cuh"

namespace megamoe {

// The tiles of a grid-wide walk; each output row (a row's wire code, row_slot) goes where
// wire.row() says.
template <int BM, int kStages, int kWire, bool kCheck, class Wire>
MM_DEVICE void stage2_tensor_core_tiles(const Stage2Args& a, const Wire& wire) {
  const int model_dim = a.w2.model_dim, inter_dim = a.w2.inter_dim;
  using Gemm = TensorCoreGemm<BM, kStages>;
  extern __shared__ __align__(16) u8 smem[];
  __shared__ int a_rows[BM], out_slot[BM];
  __shared__ float weight[BM];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int m_tiles = model_dim / Gemm::kRows;
  const int total = a.rows.tile_offsets[a.w2.experts] * m_tiles;
  for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
    const RoutedTile rt = routed_tile(tile, m_tiles, BM, a.rows.tile_offsets, a.rows.expert_offsets, a.w2.experts);
    const int e = rt.expert, m_tile = rt.col_tile;
    __syncthreads();  // the previous tile's epilogue is done with shared memory
    stage2_tile_rows<BM, Gemm::kThreads, kCheck>(rt, a.rows, a.slots, a.errors.words, a_rows,
                                                 out_slot, weight, threadIdx.x);
    __syncthreads();
    const i64 rows_e = model_dim;
    float acc[Gemm::NT][4];
    const int slab = m_tile * 8 + warp;
    Gemm::run(smem, a.h_q, a.h_scales, a_rows, inter_dim, a.w2.data + e * layout_v3_expert_bytes(rows_e, inter_dim),
              m_tile * 8, acc);
    const float* row_scale = a.w2.row_scale + e * rows_e + slab * 16;
    const float s0 = row_scale[g], s1 = row_scale[g + 8];
    const Stage2Column out0 = stage2_column(a.w2, e, 16 * slab + g), out1 = stage2_column(a.w2, e, 16 * slab + g + 8);
    float* o = reinterpret_cast<float*>(smem);  // [BM][129]
    for (int j = 0; j < Gemm::NT; ++j)
      for (int c = 0; c < 2; ++c) {
        const int n = 8 * j + 2 * t + c;
        o[n * 129 + 16 * warp + g] = out0.out(acc[j][c] * s0, weight[n]);
        o[n * 129 + 16 * warp + g + 8] = out1.out(acc[j][2 + c] * s1, weight[n]);
      }
    __syncthreads();
    const int col0 = m_tile * Gemm::kRows;
    if (kWire == kWireBf16) {
      for (int i = tid; i < BM * Gemm::kRows; i += Gemm::kThreads) {
        const int n = i / Gemm::kRows, c = i % Gemm::kRows;
        if (out_slot[n] >= 0)
          reinterpret_cast<u16*>(wire.row(out_slot[n]))[col0 + c] = mm_f32_to_bf16(o[n * 129 + c]);
      }
    } else {
      store_tile_fp8<BM, 128, 32, Gemm::kThreads>(o, 129, out_slot, wire, col0, threadIdx.x);
    }
  }
}

template <int BM, int kStages, int kWire, bool kCheck>
MM_DEVICE void stage2_tensor_core(const Stage2Args& a) {
  stage2_tensor_core_tiles<BM, kStages, kWire, kCheck>(a, wire_rows<kWire>(a.wire, a.wire_scales, a.w2.model_dim));
}

}  // namespace megamoe
