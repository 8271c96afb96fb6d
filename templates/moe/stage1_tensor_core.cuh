// Stage1 on tensor cores: per expert token tile and 128 interleaved gate/up weight rows (64
// columns of inter_dim), h = act(gate, up) with the rows' scales applied, then h in fp8 blocks
// of 64 columns (one block per tile row). A persistent grid walks the tiles routing laid out.
#pragma once
#include "common/activation.cuh"
#include "interface/kernel_args.cuh"
#include "moe/epilogue_fp8.cuh"
#include "moe/stage_outputs.cuh"
#include "moe/routed_tiles.cuh"
#include "moe/stage_gate.cuh"
#include "moe/tensor_core_gemm.cuh"

namespace megamoe {

// The tiles first, first + step, ...; a tile's rows are read once gate.wait returns (one thread
// waits; moe/stage_gate.cuh).
template <class Act, int BM, int kStages, bool kCheck, class Gate>
MM_DEVICE void stage1_tensor_core_tiles(const Stage1Args& a, int first, int step, const Gate& gate) {
  const int model_dim = a.w1.model_dim, inter_dim = a.w1.inter_dim;
  using Gemm = TensorCoreGemm<BM, kStages>;
  extern __shared__ __align__(16) u8 smem[];
  __shared__ int a_rows[BM], out_rows[BM];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int m_tiles = 2 * inter_dim / Gemm::kRows;
  const int total = a.rows.tile_offsets[a.w1.experts] * m_tiles;
  for (int tile = first; tile < total; tile += step) {
    const RoutedTile rt = routed_tile(tile, m_tiles, BM, a.rows.tile_offsets, a.rows.expert_offsets, a.w1.experts);
    const int e = rt.expert, m_tile = rt.col_tile;
    if constexpr (Gate::kWaits)
      if (tid == 0) gate.wait(rt, min(rt.p_end - rt.p0, BM), tile == first);
    __syncthreads();  // the previous tile's epilogue is done with shared memory (and the rows are there)
    stage1_tile_rows<BM, Gemm::kThreads, kCheck>(rt, a.rows, a.tokens, a.errors.words, a_rows, out_rows, threadIdx.x);
    __syncthreads();
    const i64 rows_e = 2LL * inter_dim;
    float acc[Gemm::NT][4];
    const int slab = m_tile * 8 + warp;
    Gemm::run(smem, a.x_q, a.x_scales, a_rows, model_dim, a.w1.data + e * layout_v3_expert_bytes(rows_e, model_dim),
              m_tile * 8, acc);
    // Epilogue: row g of the slab is gate column 8 * slab + g, row g + 8 its up.
    const float* row_scale = a.w1.row_scale + e * rows_e + slab * 16;
    const float sg = row_scale[g], su = row_scale[g + 8];
    const Stage1Column out = stage1_column(a.w1, e, 8 * slab + g);
    float* h = reinterpret_cast<float*>(smem);  // [BM][65]
    for (int j = 0; j < Gemm::NT; ++j)
      for (int c = 0; c < 2; ++c)
        h[(8 * j + 2 * t + c) * 65 + 8 * warp + g] = out.h<Act>(acc[j][c] * sg, acc[j][2 + c] * su);
    __syncthreads();
    store_tile_fp8<BM, 64, 64, Gemm::kThreads>(h, 65, out_rows, DenseRows{a.h_q, inter_dim, a.h_scales, inter_dim / 64},
                                               m_tile * 64, tid);
  }
}

template <class Act, int BM, int kStages, bool kCheck>
MM_DEVICE void stage1_tensor_core(const Stage1Args& a) {
  stage1_tensor_core_tiles<Act, BM, kStages, kCheck>(a, int(blockIdx.x), int(gridDim.x), NoRowsGate{});
}

}  // namespace megamoe
