// Stage1 and Stage2 on Hopper in one persistent kernel (small batch): no launch boundary between
// the stages, so Stage2's weights stream while other blocks finish Stage1. Every block walks its
// tiles of one list, Stage1's tiles (moe/stage1_hopper.cuh) and then Stage2's
// (moe/stage2_hopper.cuh), so it meets all its Stage1 tiles before any Stage2 tile. A Stage2
// tile's producer requests its first weights, then waits until every Stage1 tile of its expert
// has been stored: Stage1's storers add one per tile to a counter of the expert (expert_done,
// zeroed by dispatch each call). A Stage1 tile waits on nothing in the kernel and every block is
// resident (the runtime sizes the grid so), so every wait ends. Both stages share the pipeline
// (the same stage layout) and the epilogue region (Stage2's rows, the longer).
#pragma once
#include "moe/stage1_hopper.cuh"
#include "moe/stage2_hopper.cuh"

namespace megamoe {

// Waits until *count reaches `need` (an acquire load), then orders this thread's bulk copies after
// what the counted threads wrote with ordinary stores.
MM_DEVICE void wait_count(const int* count, int need) {
  for (;;) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(count) : "memory");
    if (v >= need) break;
    __nanosleep(128);
  }
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

template <class Act, int BN, int kStages, int kBlocksPerSM, int kXBlock, int kSharedBytes, int kWire, bool kCheck>
MM_DEVICE void stages_hopper(const StagesHopperArgs& a) {
  const int experts = a.experts, model_dim = a.model_dim, inter_dim = a.inter_dim, rows_pad = a.rows_pad;
  const int* tile_offsets1 = a.tile_offsets1;
  const int* tile_offsets2 = a.tile_offsets2;
  const int* expert_offsets = a.expert_offsets;
  int* expert_done = a.expert_done;
  const DenseRows wire = wire_rows<kWire>(a.wire, a.wire_scales, model_dim);
  using Gemm1 = HopperGemm<BN, kStages, kBlocksPerSM, kXBlock / 128>;
  using Gemm2 = HopperGemm<BN, kStages, kBlocksPerSM>;
  static_assert(Gemm1::kPipelineBytes == Gemm2::kPipelineBytes && Gemm1::kStageBytes == Gemm2::kStageBytes,
                "the stages share one pipeline");
  extern __shared__ u8 smem_raw[];
  __shared__ Stage1PairShared<BN> pair;
  u8* smem = pair.template init<Gemm1>(smem_raw);
  const int rank = cluster_rank(), peer = rank ^ 1;
  const i64 rows1 = 2LL * inter_dim, rows2 = model_dim;
  const int m1 = int(rows1 / Gemm1::kRows), m2 = model_dim / Gemm1::kRows;
  // Stage1's tiles come in pairs (m1 is even), so Stage2's start a pair and the cluster's two
  // blocks still take the two tiles of each block of h side by side.
  const int total1 = tile_offsets1[experts] * m1, total = total1 + tile_offsets2[experts] * m2;
  constexpr int kLd1 = kStage1RegionLd, kLd2 = kStage2RegionLd;
  static_assert(1023 + Gemm1::kPipelineBytes + BN * kLd2 * 4 <= kSharedBytes,
                "the catalog's shared memory holds the alignment slack, the stages and the region");
  float* region = Gemm1::region(smem);
  if (threadIdx.x < Gemm1::kProducers) {
    regs_dealloc<Gemm1::kProducerRegs>();
    const int ptid = threadIdx.x;
    Ring<Gemm1::kInfos> ts;
    if (ptid < Gemm1::kFillers) {  // as HopperGemm::run_producer, with a Stage2 tile's wait
      Ring<kStages> ps;
      for (int tile = blockIdx.x; tile < total; tile += gridDim.x, ts.advance()) {
        const bool first = tile == (int)blockIdx.x, s1 = tile < total1;
        mbar_wait(Gemm1::tile_empty(smem, ts.index), ts.phase ^ 1);
        const RoutedTile rt = s1 ? routed_tile(tile, m1, BN, tile_offsets1, expert_offsets, experts)
                                 : routed_tile(tile - total1, m2, BN, tile_offsets2, expert_offsets, experts);
        TileInfo<BN>* ti = Gemm1::info(smem, ts.index);
        if (s1)
          stage1_tile_rows<BN, Gemm1::kFillers, kCheck>(rt, a.row_token, a.rows_capacity, a.tokens, a.errors, nullptr,
                                                        ti->out, ptid);
        else
          stage2_tile_rows<BN, Gemm1::kFillers, kCheck>(rt, a.row_slot, a.row_weight, a.rows_capacity, a.slots, a.errors,
                                                        nullptr, ti->out, ti->weight, ptid);
        const int rows = min(rt.p_end - rt.p0, BN);
        if (ptid == 0) ti->expert = rt.expert, ti->col_tile = rt.col_tile, ti->rows = rows;
        mbar_arrive(Gemm1::tile_full(smem, ts.index));  // releases this thread's writes to the entry
        if (ptid == 0) {
          if (s1) {
            Gemm1::produce(smem, a.x_q, a.x_scales, rows_pad, rt.p0, rows, model_dim,
                           a.w1_units + rt.expert * layout_v3_expert_bytes(rows1, model_dim), rt.col_tile, ps, first,
                           [] { Gemm1::wait_previous_kernel(); });
          } else {
            const int need = (tile_offsets1[rt.expert + 1] - tile_offsets1[rt.expert]) * m1;
            Gemm2::produce(smem, a.h_q, a.h_scales, rows_pad, rt.p0, rows, inter_dim,
                           a.w2_units + rt.expert * layout_v3_expert_bytes(rows2, inter_dim), rt.col_tile, ps, true,
                           [=] {
                             if (first) Gemm1::wait_previous_kernel();  // a block without Stage1 tiles
                             wait_count(expert_done + rt.expert, need);
                           });
          }
        }
        __syncwarp();
      }
    } else {  // the storers
      const int stid = ptid - Gemm1::kFillers;
      Stage1Storer<BN, Gemm1::kStorers, kLd1> store1{&pair, rank, peer, rows_pad, a.h_q, a.h_scales};
      u32 phase = 0;
      for (int tile = blockIdx.x; tile < total; tile += gridDim.x, ts.advance(), phase ^= 1) {
        mbar_wait(Gemm1::out_full(smem), phase);
        const TileInfo<BN>& ti = *Gemm1::info(smem, ts.index);
        if (tile < total1) {
          store1(ti, region, stid);
          __threadfence();  // this tile's h is visible before it is counted
          named_barrier(1, Gemm1::kStorers);
          if (stid == 0) atomicAdd(expert_done + ti.expert, 1);
        } else {
          stage2_store<BN, Gemm1::kStorers, kLd2, kWire>(ti, region, stid, wire);
        }
        mbar_arrive(Gemm1::out_empty(smem));
        mbar_arrive(Gemm1::tile_empty(smem, ts.index));
      }
    }
  } else {  // the consumers, as HopperGemm::run_consumers with each stage's main loop and stash
    regs_alloc<Gemm1::kConsumerRegs>();
    const int ctid = threadIdx.x - Gemm1::kProducers;
    Ring<kStages> ps;
    Ring<Gemm1::kInfos> ts;
    IssueTurns turns;  // unused: the fp8-resident kernels are not fused
    u32 phase = 0;
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x, ts.advance(), phase ^= 1) {
      mbar_wait(Gemm1::tile_full(smem, ts.index), ts.phase);
      const TileInfo<BN>& ti = *Gemm1::info(smem, ts.index);
      float acc[Gemm1::NT][4];
      if (tile < total1) {
        Gemm1::consume(smem, ctid, model_dim, ps, acc, ti.rows, turns);
        mbar_wait(Gemm1::out_empty(smem), phase ^ 1);
        stage1_stash<Act, Gemm1, kLd1>(ti, acc, ctid, region, a.w1_row_scale, rows1);
      } else {
        Gemm2::consume(smem, ctid, inter_dim, ps, acc, ti.rows, turns);
        mbar_wait(Gemm1::out_empty(smem), phase ^ 1);
        Gemm2::stash_rows(acc, a.w2_row_scale + ti.expert * rows2, ti.col_tile, region, kLd2, ctid,
                          [&](int n) { return ti.weight[n]; });  // the route weight
      }
      mbar_arrive(Gemm1::out_full(smem));  // releases this thread's writes to the region
    }
  }
  cluster_sync();  // neither block leaves while its peer may still write to its shared memory
}

}  // namespace megamoe
