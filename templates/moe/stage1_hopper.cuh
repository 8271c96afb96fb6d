// Stage1 on Hopper (wgmma, warp-specialised; moe/hopper_gemm.cuh): per expert token tile and
// 128 x kGroups interleaved gate/up weight rows (64 x kGroups columns of inter_dim), h = act(gate,
// up) with the rows' scales applied (by the consumers), then h in fp8 blocks of 128 columns (by
// the storers), written routed (moe/routed_rows.cuh) for Stage2. With kGroups 1 a block of 128
// columns spans two tiles: the kernel runs in clusters of two blocks that take the two tiles of a
// block side by side (the persistent walk hands block 2c + r the tiles 2u + r, and a token tile's
// column tiles are consecutive), and each block's storers send the other their rows' maxima over
// 64 columns before both quantize. With kGroups 2 a tile holds whole blocks, and with kHStatic h is
// quantized with the one exponent kHExponent (2^kHExponent x 448 holds the activation's bound:
// docs/layer.md, "Scale modes"), with no maxima and no scales written: neither runs in clusters
// (the launch gives none: kernel_specs_hopper.cpp). x comes routed from dispatch, in scale blocks
// of kXBlock (128 k per chunk: kXBlock / 128 chunks per promotion), or with one scale per row
// (kXPerRow: the whole K summed with no promotion). A persistent grid walks the tiles routing laid
// out.
#pragma once
#include "common/activation.cuh"
#include "interface/kernel_args.cuh"
#include "moe/stage_outputs.cuh"
#include "moe/hopper_gemm.cuh"
#include "moe/routed_rows.cuh"
#include "moe/routed_tiles.cuh"

namespace megamoe {

// Shared memory of Stage1's storers beside the pipeline: the tile's maxima per token row over its
// 64 columns of h, the block's own and the cluster peer's (two tiles in turn), with the
// barriers the peer's storers arrive on once they are written (hopper_pair_shared_bytes, the
// host's count of the kernel's static shared memory).
template <int BM>
struct Stage1PairShared {
  float own_amax[BM], pair_amax[2][BM];
  u64 pair_full[2];
  static_assert(sizeof(float) * 3 * BM + sizeof(u64) * 2 == hopper_pair_shared_bytes(BM), "the host's count");

  // All threads, first: the barriers and the pipeline (Gemm's) initialised, in both blocks of the
  // cluster before any arrival on them (kPaired; without, a block of its own). Returns the
  // pipeline's shared memory.
  template <class Gemm, bool kPaired>
  MM_DEVICE u8* init(u8* smem_raw) {
    u8* smem = Gemm::align(smem_raw);
    if (kPaired && threadIdx.x == 0)
      for (int b = 0; b < 2; ++b) mbar_init(&pair_full[b], Gemm::kStorers);  // fenced in Gemm::init
    Gemm::init(smem);
    if constexpr (kPaired) cluster_sync();
    return smem;
  }

  // All threads, last: neither block of a cluster leaves while its peer may still write to its
  // shared memory.
  template <bool kPaired>
  MM_DEVICE static void finish() {
    if constexpr (kPaired) cluster_sync();
  }
};

// Stage1's storers (warpgroup 0's warps 1 to 3) for one tile. With kGroups 1 the tile's 64
// columns of h are half col_tile % 2 of Stage2's chunk col_tile / 2, whose other half the cluster
// peer holds: first a thread per row takes the row's maximum (16-byte loads, no shuffles: rows kLd
// floats apart fall in distinct banks) and sends it to the peer, then a half warp per row
// quantizes it with the chunk's exponent and stores it routed. With kGroups 2 the tile's 128
// columns are chunk col_tile, each row's maximum its own. Called once per Stage1 tile, in order
// (`it` alternates the peer's buffers). kHStatic: only the second part, with kHExponent and no
// scales.
template <int BM, int kStorers, int kLd, bool kHStatic, int kHExponent, int kGroups>
struct Stage1Storer {
  static constexpr bool kPaired = !kHStatic && kGroups == 1;
  Stage1PairShared<BM>* sh;
  int rank, peer, rows_pad;
  u8* h_q;
  float* h_scales;
  int it = 0;

  MM_DEVICE void operator()(const TileInfo<BM>& ti, const float* o, int stid) {
    if constexpr (kHStatic) {
      store_rows(ti, o, stid, false, [](int) { return kHExponent; });
      return;
    }
    float* row_amax = sh->own_amax;
    const int b = it & 1;  // the peer's buffer of this tile (kPaired)
    const u32 to_peer = kPaired ? peer_addr(sh->pair_amax[b], peer) : 0u;
#pragma unroll 1
    for (int n = stid; n < ti.rows; n += kStorers) {
      const float4* row = reinterpret_cast<const float4*>(o + n * kLd);
      float m[4] = {0.f, 0.f, 0.f, 0.f};
      for (int q = 0; q < 16 * kGroups; ++q) {
        const float4 h = row[q];
        m[q & 3] = fmaxf(m[q & 3], fmaxf(fmaxf(fabsf(h.x), fabsf(h.y)), fmaxf(fabsf(h.z), fabsf(h.w))));
      }
      const float amax = fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
      row_amax[n] = amax;
      if constexpr (kPaired) peer_store(to_peer + 4 * n, amax);
    }
    named_barrier(1, kStorers);  // row_amax for every storer
    if constexpr (kPaired) {
      const u32 phase = u32(it >> 1) & 1;
      ++it;
      const float* peer_amax = sh->pair_amax[b];
      peer_arrive(peer_addr(sh->pair_full + b, peer));
      mbar_wait<true>(sh->pair_full + b, phase);
      store_rows(ti, o, stid, rank == 0,
                 [&](int n) { return mm_fp8_block_exponent(fmaxf(row_amax[n], peer_amax[n])); });
    } else {
      store_rows(ti, o, stid, true, [&](int n) { return mm_fp8_block_exponent(row_amax[n]); });
    }
  }

  // A half warp per row and 64 values: quantized with exponent(n) and stored routed (with the
  // chunk's scale where with_scale, by the writer of the chunk's first half or, with kGroups 1,
  // of either).
  template <class Exponent>
  MM_DEVICE void store_rows(const TileInfo<BM>& ti, const float* o, int stid, bool with_scale, Exponent exponent) const {
    const int lane16 = stid & 15;
    constexpr int kHalves = kStorers / 16;
#pragma unroll 1
    for (int i = stid / 16; i < ti.rows * kGroups; i += kHalves) {
      const int n = i / kGroups, part = i % kGroups;
      const int out = ti.out[n];
      if (out < 0) continue;
      const float4 h = *reinterpret_cast<const float4*>(o + n * kLd + 64 * part + 4 * lane16);
      const float v[4] = {h.x, h.y, h.z, h.w};
      const int half = kGroups == 1 ? ti.col_tile & 1 : part, chunk = kGroups == 1 ? ti.col_tile / 2 : ti.col_tile;
      store_routed_half(v, lane16, half, chunk, out, n & 15, rows_pad, exponent(n), with_scale && part == 0, h_q,
                        h_scales);
    }
  }
};

// Stage1's consumers take the activation: each thread holds a gate sum and its up sum (rows g and
// g + 8 of its warp's slab), so h needs no trip through shared memory in between, and the
// storers, which the consumers wait for at every tile, keep only the quantization. The region
// holds h of the tile's 64 x kGroups columns per token row at 8 * warp + g (the rows' scales
// applied, then the biases: the slab's gate column 8 * slab + g and its up).
template <class Act, class Gemm, int kLd>
MM_DEVICE void stage1_stash(const TileInfo<Gemm::kBM>& ti, const float (&acc)[Gemm::NT][4], int ctid, float* o,
                            const ExpertWeights& w1) {
  const int warp = ctid >> 5, lane = ctid & 31, g = lane >> 2, t = lane & 3;
  const int rows_e = 2 * w1.inter_dim, slab = ti.col_tile * (Gemm::kRows / 16) + warp;
  const float* rs = w1.row_scale + ti.expert * i64(rows_e) + slab * 16;
  const float s_gate = rs[g], s_up = rs[g + 8];
  const Stage1Column out = stage1_column(w1, ti.expert, 8 * slab + g);
#pragma unroll  // acc stays in registers
  for (int j = 0; j < Gemm::NT; ++j) {
    if (8 * j >= ti.rows) break;  // columns past the routed rows are never stored
    for (int c = 0; c < 2; ++c)
      o[(8 * j + 2 * t + c) * kLd + 8 * warp + g] = out.h<Act>(acc[j][c] * s_gate, acc[j][2 + c] * s_up);
  }
}

// The tiles of a walk: the producer warpgroup's storers fill each tile's rows ahead (fill) and its
// copier stages the chunks once gate allows, the consumers compute and stash h, the storers
// quantize and store it.
// smem: the pipeline, initialised (Stage1PairShared::init).
template <class Act, class Gemm, bool kHStatic, int kHExponent, bool kCheck, class Fill, class Gate>
MM_DEVICE void stage1_hopper_walk(const Stage1HopperArgs& a, u8* smem, Stage1PairShared<Gemm::kBM>* sh,
                                  const TileWalk& walk, Fill fill, Gate gate) {
  constexpr int BM = Gemm::kBM, kGroups = Gemm::kWeightGroups, kLd = hopper_region_ld(1, kGroups);
  using Storer = Stage1Storer<BM, Gemm::kStorers, kLd, kHStatic, kHExponent, kGroups>;
  const int rank = Storer::kPaired ? cluster_rank() : 0, peer = rank ^ 1;
  const i64 rows_e = 2LL * a.w1.inter_dim;
  if (threadIdx.x < Gemm::kProducers) {
    Gemm::run_producer(smem, walk, a.x_q, a.x_scales, a.rows.rows_pad, a.w1.model_dim, a.w1.data,
                       Gemm::expert_bytes(rows_e, a.w1.model_dim), fill,
                       Storer{sh, rank, peer, a.rows.rows_pad, a.h_q, a.h_scales},
                       gate);
  } else {
    Gemm::run_consumers(smem, walk, a.w1.model_dim,
                        [=](const TileInfo<BM>& ti, float (&acc)[Gemm::NT][4], int ctid, float* o) {
                          stage1_stash<Act, Gemm, kLd>(ti, acc, ctid, o, a.w1);
                        });
  }
}

// The walk over every Stage1 tile routing laid out: each block's tiles blockIdx.x + i gridDim.x.
template <class Gemm>
MM_DEVICE TileWalk stage1_hopper_tiles(const Stage1HopperArgs& a, int first, int step) {
  const int m_tiles = 2 * a.w1.inter_dim / Gemm::kRows;
  return TileWalk{a.rows.tile_offsets[a.w1.experts] * m_tiles, m_tiles, a.rows.tile_offsets, a.rows.expert_offsets,
                  a.w1.experts, first, step};
}

// kSharedBytes: the dynamic shared memory the launch gives (hopper_dynamic_smem_bytes), checked
// here against what the pipeline and the region (h's [BM][hopper_region_ld(1, kGroups)] floats: 4
// of padding keep the consumers' writes free of bank conflicts and the storers' rows 16-byte
// aligned) take. kGroups: 128-row groups of weight rows a block. kResident: a.w1.data is the
// fp8-resident copy, read by moe/hopper_fp8_ss_loop.cuh.
template <class Act, int BM, int kStages, int kBlocksPerSM, int kGroups, int kXBlock, bool kHStatic, int kHExponent,
          int kSharedBytes, bool kCheck, bool kResident>
MM_DEVICE void stage1_hopper(const Stage1HopperArgs& a) {
  using Gemm = HopperGemmOf<BM, kStages, kBlocksPerSM, hopper_x_scale_chunks(kXBlock), kGroups, kResident>;
  constexpr bool kPaired = !kHStatic && kGroups == 1;
  static_assert(1023 + Gemm::kPipelineBytes + BM * hopper_region_ld(1, kGroups) * 4 <= kSharedBytes,
                "the launch's shared memory holds the alignment slack, the stages and the region");
  extern __shared__ u8 smem_raw[];
  __shared__ Stage1PairShared<BM> pair;
  u8* smem = pair.template init<Gemm, kPaired>(smem_raw);
  stage1_hopper_walk<Act, Gemm, kHStatic, kHExponent, kCheck>(
      a, smem, &pair, stage1_hopper_tiles<Gemm>(a, int(blockIdx.x), int(gridDim.x)),
      [=](const RoutedTile& rt, TileInfo<BM>* ti, int stid) {
        stage1_tile_rows<BM, Gemm::kFillers, kCheck>(rt, a.rows, a.tokens, a.errors.words, nullptr, ti->out, stid);
      },
      FirstTileGate{});
  Stage1PairShared<BM>::template finish<kPaired>();
}

}  // namespace megamoe
