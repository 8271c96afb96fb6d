// Stage2 on Hopper (wgmma, warp-specialised; moe/hopper_gemm.cuh): per expert token tile and
// 128 x kGroups rows of W2 (as many columns of model_dim), o = W2 h with the rows' scales, times the route weight,
// onto the combine wire at the row's slot: bf16 (kWire 0) or fp8 1x32 blocks (kWire 1). h comes
// routed from Stage1 (moe/routed_rows.cuh): in blocks of 128 (one promotion per chunk) or, with
// kHStatic, in the one scale 2^kHExponent (the whole K summed with no promotion, the constant
// applied in the stash).
#pragma once
#include "interface/kernel_args.cuh"
#include "moe/epilogue_fp8.cuh"
#include "moe/hopper_gemm.cuh"
#include "moe/routed_tiles.cuh"

namespace megamoe {

// Stage2's storers (warpgroup 0's warps 1 to 3) for one tile: the region's rows (the tile's kCols
// output columns, kLd floats apart) onto the wire row of each row's code (wire.row()).
template <int BM, int kCols, int kStorers, int kLd, int kWire, class Wire>
MM_DEVICE void stage2_store(const TileInfo<BM>& ti, const float* o, int stid, const Wire& wire) {
  const int col0 = ti.col_tile * kCols;
  if (kWire == kWireBf16) {  // four values per thread and step: one 16-byte load, one 8-byte store
    for (int i = stid; i < ti.rows * (kCols / 4); i += kStorers) {
      const int n = i / (kCols / 4), c = 4 * (i % (kCols / 4)), slot = ti.out[n];
      if (slot >= 0) {
        const float4 v = *reinterpret_cast<const float4*>(o + n * kLd + c);
        *reinterpret_cast<uint2*>(reinterpret_cast<u16*>(wire.row(slot)) + col0 + c) =
            make_uint2(u32(mm_f32_to_bf16(v.x)) | (u32(mm_f32_to_bf16(v.y)) << 16),
                       u32(mm_f32_to_bf16(v.z)) | (u32(mm_f32_to_bf16(v.w)) << 16));
      }
    }
  } else {
    store_tile_fp8<BM, kCols, 32, kStorers>(o, kLd, ti.out, wire, col0, stid);
  }
}

// The tiles of a grid-wide walk, rows onto `wire`; every thread returns here. The region:
// [BM][hopper_region_ld(2, kGroups)] floats, the tile's rows with the weight rows' scales, the
// biases and the route weights applied (row g of a warp's slab at 16 * warp + g, row g + 8 at + 8): the
// consumers' writes fall in 32 different banks, and the storers read 16-byte pieces.
template <class Gemm, bool kHStatic, int kHExponent, int kWire, bool kCheck, class Wire>
MM_DEVICE void stage2_hopper_walk(const Stage2HopperArgs& a, u8* smem, const Wire& wire) {
  constexpr int BM = Gemm::kBM, kLd = hopper_region_ld(2, Gemm::kWeightGroups);
  const int model_dim = a.w2.model_dim, inter_dim = a.w2.inter_dim;
  const i64 rows_e = model_dim;
  const TileWalk walk{a.rows.tile_offsets[a.w2.experts] * (model_dim / Gemm::kRows),
                      model_dim / Gemm::kRows,
                      a.rows.tile_offsets,
                      a.rows.expert_offsets,
                      a.w2.experts,
                      int(blockIdx.x),
                      int(gridDim.x)};
  const float h_scale = kHStatic ? mm_pow2(kHExponent) : 1.f;
  if (threadIdx.x < Gemm::kProducers) {
    Gemm::run_producer(
        smem, walk, a.h_q, a.h_scales, a.rows.rows_pad, inter_dim, a.w2.data, Gemm::expert_bytes(rows_e, inter_dim),
        [=](const RoutedTile& rt, TileInfo<BM>* ti, int stid) {
          stage2_tile_rows<BM, Gemm::kFillers, kCheck>(rt, a.rows, a.slots, a.errors.words, nullptr, ti->out,
                                                       ti->weight, stid);
        },
        [=](const TileInfo<BM>& ti, const float* o, int stid) {
          stage2_store<BM, Gemm::kRows, Gemm::kStorers, kLd, kWire>(ti, o, stid, wire);
        });
  } else {
    Gemm::run_consumers(smem, walk, inter_dim,
                        [=](const TileInfo<BM>& ti, float (&acc)[Gemm::NT][4], int ctid, float* o) {
                          Gemm::stash_rows(acc, a.w2, ti.expert, ti.col_tile, o, kLd, ctid, h_scale,
                                           [&](int n) { return ti.weight[n]; });  // the route weight
                        });
  }
}

// kSharedBytes: the dynamic shared memory the launch gives (hopper_dynamic_smem_bytes), checked
// here against what the pipeline and the region take. kGroups: 128-row groups of weight rows a
// block. kResident: a.w2.data is the fp8-resident copy, read by moe/hopper_fp8_ss_loop.cuh.
template <int BM, int kStages, int kBlocksPerSM, int kGroups, bool kHStatic, int kHExponent, int kSharedBytes,
          int kWire, bool kCheck, bool kResident>
MM_DEVICE void stage2_hopper(const Stage2HopperArgs& a) {
  using Gemm = HopperGemmOf<BM, kStages, kBlocksPerSM, kHStatic ? int(kScaleStatic) : 1, kGroups, kResident>;
  static_assert(1023 + Gemm::kPipelineBytes + BM * hopper_region_ld(2, kGroups) * 4 <= kSharedBytes,
                "the launch's shared memory holds the alignment slack, the stages and the region");
  extern __shared__ u8 smem_raw[];
  u8* smem = Gemm::align(smem_raw);
  Gemm::init(smem);
  stage2_hopper_walk<Gemm, kHStatic, kHExponent, kWire, kCheck>(a, smem, wire_rows<kWire>(a.wire, a.wire_scales, a.w2.model_dim));
}

}  // namespace megamoe
