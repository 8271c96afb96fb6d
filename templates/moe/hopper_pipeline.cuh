// What both Hopper main loops share (moe/hopper_gemm.cuh puts one in it): the roles, the stages
// and their barriers, the producer, the promotion of partial sums and the epilogue's hand-off.
#pragma once
#include "common/numerics.cuh"
#include "interface/kernel_constants.cuh"
#include "moe/routed_tiles.cuh"
#include "moe/stage_outputs.cuh"
#include "hopper/pipeline.cuh"
#include "hopper/wgmma.cuh"

namespace megamoe {

// Position in a ring of buffers; advanced in step by every thread of a role.
template <int kSize>
struct Ring {
  int index = 0;
  u32 phase = 0;
  MM_DEVICE void advance() {
    if (++index == kSize) index = 0, phase ^= 1;
  }
};

// The persistent walk over the tiles routing laid out: `total` tiles of m_tiles weight tiles each
// per token tile; a block takes tiles first, first + step, ... (its index and the grid's, unless
// some blocks of the grid do other work).
struct TileWalk {
  int total, m_tiles;
  const int* tile_offsets;
  const int* expert_offsets;
  int experts;
  int first, step;
};

// What a tile's producer waits for before it copies the tile's activations, and whether it
// requests the tile's first weights before that wait. By default a block's first tile requests
// early and waits for the previous kernel (Device::launch's early_start); every later tile's
// inputs are there by then.
struct FirstTileGate {
  MM_DEVICE bool early(bool first) const { return first; }
  MM_DEVICE void wait(const RoutedTile&, int, bool) const {
    mm_wait_prior_grid();
    mm_release_dependents();
  }
};

// What the copier and the consumers' epilogue need of a tile, written by the storers ahead.
template <int BM>
struct TileInfo {
  int expert, col_tile;
  int rows;          // columns 0 .. rows - 1 have routed rows (the rest lie past the expert's end)
  int p0;            // the tile's first routed row
  int out[BM];       // Stage1: the output row of token column n; Stage2: its wire slot; -1 for none
  float weight[BM];  // Stage2: the route weight
};

// Warp-specialised, wgmma on fp8, weights as the A operand (swap AB: 128 x kGroups weight rows per
// block, the routed tokens on N). Warpgroup 0 produces and stores. Its storers (warps 1 to 3) work
// out each tile's place and rows' destinations four tiles ahead (a four-entry TileInfo ring), so
// that those dependent global loads never hold up the copies; per 128-k chunk one thread of warp 0
// (the copier) starts the bulk copies of a stage on its `full` mbarrier: the block's weight units
// of the chunk (Loop's, one per group of 128 rows) and the tile's activations and their scales
// (routed layout, moe/routed_rows.cuh: BM x 128 B already in the 128-byte swizzle, and BM x 16 B).
// The other warpgroups (2 x kGroups) consume: each owns 64 weight rows (four slabs; consumer warp w
// the slab w % 8 of group w / 8) and runs Loop's main loop over the chunks, whose partial sums of
// an activation scale block (one chunk for h, kScaleChunks chunks for x) are scaled by the
// activations' scales and added to the accumulators (promote; the weights' row scales are left to
// the epilogue); `empty` barriers hand the stages back. At the end of a tile the consumers stash
// their sums (scaled; Stage1's with the activation applied) in the shared output region and go on
// to the next tile; warpgroup 0's other three warps (the storers) finish the epilogue from there
// (quantization, stores), overlapped with the next tile's wgmma. A tile's wgmma span the narrowest
// multiple of 16 token columns that holds its routed rows (the main loop exists at every width up
// to BM). Producer, consumers and storers walk the same tiles and chunks, so one running stage
// index keeps them in step across tiles, and the producer runs ahead into the next tile.
//
// Loop (moe/hopper_mxfp4_loop.cuh, moe/hopper_fp8_ss_loop.cuh): its unit (kUnitBytes: kWordBytes of
// weights, then kExpBytes of exponents; kResident, how the host's sizes name it; expert_bytes,
// unit), its per-thread State across tiles (finish() after the last) and consume_at<N>.
// kBlocksPerSM 2 (small token tiles): two blocks share an SM, twice the consumer warps to hide the
// latencies of a chunk, with the registers and shared memory halved. kGroups 2 (256 weight rows):
// four consumer warpgroups, as many consumer warps with the registers halved, each tile's
// activations read once for twice the weight rows (no promotion only: the partial sums of a
// promotion do not fit the halved registers). kScaleChunks: chunks of 128 k per activation scale
// block (1, or an even count: the wgmma of a block's chunks sum into one set of partial sums,
// promoted once per block), or with no promotion at all (interface/kernel_constants.cuh):
// kScaleWholeK, every chunk's wgmma into the accumulators and the row's scale applied once at the
// end (scale_columns); kScaleStatic, no scales copied (the stash applies the one constant).
template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups, class Loop>
struct HopperPipeline {
  static constexpr int kThreads = hopper_threads(kGroups), kProducers = 128, kConsumers = 256 * kGroups,
                       kRows = kWeightRowsPerBlock * kGroups;
  static constexpr int kBM = BM, kWeightGroups = kGroups;
  static_assert(kGroups == 1 || kGroups == 2, "128 or 256 weight rows a block");
  static_assert(kGroups == 1 || kBlocksPerSM == 1, "256 weight rows take the SM");
  static constexpr int kStorers = kProducers - 32;  // warps 1 to 3; warp 0 copies
  static constexpr int kFillers = kStorers;            // the storers fill the TileInfo entries
  // TileInfo entries: the storers fill a tile's entry once they have stored the tile kInfos
  // before it, so the copier finds it there and never waits on the fill's global loads.
  static constexpr int kInfos = kHopperTileInfos;
  // Hardware barrier ids: 0 is __syncthreads', 1 Stage1's storers' (moe/stage1_hopper.cuh), 2 and 3
  // the fp8-resident loop's (moe/hopper_fp8_ss_loop.cuh).
  static constexpr int kStorersBarrier = 4;
  // setmaxnreg.inc takes only from what .dec gave back within the block: 128 x kProducerRegs +
  // kConsumers x kConsumerRegs must not exceed kThreads x the launch bound's registers (168, 80,
  // or 96 for 640 threads), or the consumers wait for registers forever. 112 hold a 96-token
  // tile's sums and two sets of fragments without spills (kHopperMaxBmWide).
  static constexpr int kLaunchRegs = 65536 / (kThreads * kBlocksPerSM) / 8 * 8;
  static constexpr int kProducerRegs = kBlocksPerSM == 1 && kGroups == 1 ? 40 : 32;
  static constexpr int kConsumerRegs = kGroups == 2 ? 112 : kBlocksPerSM == 1 ? 232 : 104;
  static_assert(128 * kProducerRegs + kConsumers * kConsumerRegs <= kThreads * kLaunchRegs,
                "the consumers' registers come from what the producers give back");
  static constexpr int NT = BM / 8;
  static constexpr bool kPromotes = kScaleChunks > 0;
  static_assert(!kPromotes || kScaleChunks == 1 || kScaleChunks % 2 == 0,
                "scale blocks of one chunk or of an even count");
  static_assert(!kPromotes || kGroups == 1, "256 weight rows with no promotion only");
  static_assert(kPromotes || kScaleChunks == kScaleWholeK || kScaleChunks == kScaleStatic, "a scale form");
  // Two sets of fragments beside the sums and one set of partial sums fit 232 registers up to
  // 176 tokens, without the partial sums up to 256; the sums and two sets of fragments, 112
  // registers up to kHopperMaxBmWide.
  static constexpr int kMaxBm = kGroups == 2 ? kHopperMaxBmWide : kPromotes ? kHopperMaxBmPromoted : kHopperMaxBm;
  static_assert(BM % 16 == 0 && BM >= 16 && BM <= kMaxBm, "BM: a multiple of 16 tokens up to the registers' limit");

  // Shared memory (from a 1024-aligned base): the barriers (512 bytes) and the TileInfo ring, then kStages
  // stages of [activations BM x 128 B, swizzled][a unit per group: weights, then exponents]
  // [activation scales BM x 4 f32 (2 used)], each stage 1024-aligned as the swizzle needs, then the
  // epilogue region (interface/kernel_constants.cuh: the host sizes the launch from the same functions).
  // The weights sit at a 1024-aligned offset (BM x 128 bytes in), the swizzle's atom, as a shared
  // memory descriptor of them needs (the fp8-resident units are 16 KB: every group's is aligned).
  static constexpr int kUnitBytes = Loop::kUnitBytes;
  static constexpr int kActBytes = BM * 128, kWordBytes = Loop::kWordBytes, kExpBytes = Loop::kExpBytes,
                       kScaleBytes = BM * 16;
  static constexpr int kWordsAt = kActBytes, kExpsAt = kWordsAt + kWordBytes,
                       kScalesAt = kWordsAt + kGroups * kUnitBytes;
  static constexpr int kStageBytes = hopper_stage_bytes(BM, Loop::kResident, kGroups);
  static constexpr int kHeadBytes = hopper_head_bytes(BM);
  static constexpr int kPipelineBytes = hopper_pipeline_bytes(BM, kStages, Loop::kResident, kGroups);
  static_assert(kStageBytes == round_up_1024(kScalesAt + kScaleBytes), "a stage's parts, 1024-aligned");
  static_assert(int(sizeof(TileInfo<BM>)) == hopper_tile_info_bytes(BM), "the TileInfo ring's size");
  static_assert(2 * kStages + kInfos + 2 <= kHopperBarrierBytes / 8, "barriers fit their 512 bytes");
  static_assert(kWordsAt % 1024 == 0, "the weights' chunk starts on a swizzle atom");

  // Bytes of one expert's weights as the kernel reads them.
  MM_DEVICE static i64 expert_bytes(i64 rows, int k) { return Loop::expert_bytes(rows, k); }

  MM_DEVICE static u8* align(u8* raw) {
    const u32 a = sm_addr(raw);
    return raw + ((1024 - (a & 1023)) & 1023);
  }
  MM_DEVICE static u64* full(u8* smem, int s) { return reinterpret_cast<u64*>(smem) + s; }
  MM_DEVICE static u64* empty(u8* smem, int s) { return reinterpret_cast<u64*>(smem) + kStages + s; }
  MM_DEVICE static u64* tile_full(u8* smem, int b) { return reinterpret_cast<u64*>(smem) + 2 * kStages + b; }
  MM_DEVICE static u64* out_full(u8* smem) { return reinterpret_cast<u64*>(smem) + 2 * kStages + kInfos; }
  MM_DEVICE static u64* out_empty(u8* smem) { return reinterpret_cast<u64*>(smem) + 2 * kStages + kInfos + 1; }
  MM_DEVICE static TileInfo<BM>* info(u8* smem, int b) { return reinterpret_cast<TileInfo<BM>*>(smem + kHopperBarrierBytes) + b; }
  MM_DEVICE static u8* stage(u8* smem, int s) { return smem + kHeadBytes + s * kStageBytes; }
  MM_DEVICE static float* region(u8* smem) { return reinterpret_cast<float*>(smem + kPipelineBytes); }

  // All threads: before the roles split.
  MM_DEVICE static void init(u8* smem) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) {
        mbar_init(full(smem, s), 1);                 // the producer's expect_tx; then the bytes
        mbar_init(empty(smem, s), kConsumers / 32);  // one arrival per consumer warp
      }
      for (int b = 0; b < kInfos; ++b) mbar_init(tile_full(smem, b), kFillers);
      mbar_init(out_full(smem), kConsumers);
      mbar_init(out_empty(smem), kStorers);
      mbar_init_fence();
    }
    __syncthreads();
  }

  // Whether chunk `chunk` of `chunks` has its stage hold the scales: the last chunk of each scale
  // block (the block's scales are repeated in each of its chunks' entries; one copy of them is
  // enough), the last of all with one scale per row, none with a static scale.
  MM_DEVICE static bool has_scales(int chunk, int chunks) {
    if constexpr (kScaleChunks == kScaleStatic) return false;
    else if constexpr (kScaleChunks == kScaleWholeK) return chunk == chunks - 1;
    else return chunk % kScaleChunks == kScaleChunks - 1;
  }

  // Where consumer warp `warp`'s group of 128 weight rows has its unit in a stage (its slab: warp % 8).
  MM_DEVICE static constexpr int unit_at(int warp) { return kWordsAt + (warp >> 3) * kUnitBytes; }

  // One producer thread: stages the K / 128 chunks of a tile whose rows start at routed row p0.
  // a_q / a_scales: the routed activations (rows_pad rows per chunk); units: the expert's weights
  // (Loop's form), group the block's first group of 8 slabs (col_tile x kGroups: its weight tile).
  // Only the tile's routed rows, rounded up to
  // the 8-row swizzle atom, are copied: an expert's rows rarely fill a tile at small batch, and
  // the columns past them are computed from stale shared memory and never stored. With `early`
  // the weights of the first stages are requested before wait_inputs() is called, which waits
  // for whatever writes the activations (for a block's first tile, the previous kernel:
  // Device::launch's early_start): they stream in meanwhile.
  template <class WaitInputs>
  MM_DEVICE static void produce(u8* smem, const u8* a_q, const float* a_scales, int rows_pad, int p0, int rows,
                                int K, const u8* units, int group, Ring<kStages>& ps, bool early,
                                WaitInputs wait_inputs) {
    const int chunks = K / 128;
    const u32 rows8 = u32(min((rows + 7) & ~7, BM)), act_bytes = rows8 * 128, scale_bytes = rows8 * 16;
    auto request_weights = [&](int chunk, const Ring<kStages>& r) {
      mbar_wait(empty(smem, r.index), r.phase ^ 1);
      u8* st = stage(smem, r.index);
      u64* bar = full(smem, r.index);
      // the unit's weights, then their exponents, as the stage keeps them
      static_assert(kExpsAt == kWordsAt + kWordBytes && kWordBytes + kExpBytes == kUnitBytes,
                    "a unit lands in one copy");
      mbar_arrive_expect_tx(bar, kGroups * kUnitBytes + act_bytes + (has_scales(chunk, chunks) ? scale_bytes : 0u));
      for (int i = 0; i < kGroups; ++i)
        bulk_copy_g2s(st + kWordsAt + i * kUnitBytes, Loop::unit(units, group + i, chunk, chunks), kUnitBytes, bar);
    };
    int requested = 0;
    if (early) {
      Ring<kStages> r = ps;
      for (; requested < chunks && requested < kStages; ++requested, r.advance()) request_weights(requested, r);
      wait_inputs();
    }
    for (int chunk = 0; chunk < chunks; ++chunk, ps.advance()) {
      if (chunk >= requested) request_weights(chunk, ps);
      u8* st = stage(smem, ps.index);
      u64* bar = full(smem, ps.index);
      bulk_copy_g2s(st, a_q + ((i64)chunk * rows_pad + p0) * 128, act_bytes, bar);
      if (has_scales(chunk, chunks)) bulk_copy_g2s(st + kScalesAt, a_scales + ((i64)chunk * rows_pad + p0) * 4, scale_bytes, bar);
    }
  }

  // The activation scales of token column groups j and j + 1 (columns 8j + 2t, 8j + 2t + 1 and
  // those of j + 1), whose entries start at row 8j (4 floats per row): one 16-byte load.
  MM_DEVICE static float4 scale_pair(const u8* st, int t, int j) {
    const float* scales = reinterpret_cast<const float*>(st + kScalesAt);
    return *reinterpret_cast<const float4*>(scales + 4 * 8 * j + 4 * t);
  }

  // acc += p x (the chunk's scale of each token column), the scales four at a time in the routed
  // layout's order (moe/routed_rows.cuh). With kFirst, first holds the first pair's, loaded before
  // the next chunk's conversion (HopperMxfp4Loop::step), so the first multiply-adds need not wait
  // for a load. p: the first PT of acc's NT column groups (the tile's width, see consume).
  template <bool kFirst, int PT>
  MM_DEVICE static void promote(float (&acc)[NT][4], const float (&p)[PT][4], const u8* st, int t, float4 first) {
    static_assert(PT % 2 == 0 && PT <= NT, "whole pairs of column groups within the accumulators");
    for (int j = 0; j < PT; j += 2) {
      const float4 u = kFirst && j == 0 ? first : scale_pair(st, t, j);
      const float s0[2] = {u.x, u.z}, s1[2] = {u.y, u.w};  // [j, j + 1]
      for (int i = 0; i < 2; ++i) {
        acc[j + i][0] = fmaf(p[j + i][0], s0[i], acc[j + i][0]);
        acc[j + i][1] = fmaf(p[j + i][1], s1[i], acc[j + i][1]);
        acc[j + i][2] = fmaf(p[j + i][2], s0[i], acc[j + i][2]);
        acc[j + i][3] = fmaf(p[j + i][3], s1[i], acc[j + i][3]);
      }
    }
  }

  // kScaleWholeK: acc, the whole K's sums of its first PT column groups, times each token
  // column's scale (one per row, from the stage of the last chunk), in place.
  template <int PT>
  MM_DEVICE static void scale_columns(float (&acc)[NT][4], const u8* st, int t) {
    static_assert(PT % 2 == 0 && PT <= NT, "whole pairs of column groups within the accumulators");
    for (int j = 0; j < PT; j += 2) {
      const float4 u = scale_pair(st, t, j);
      const float s0[2] = {u.x, u.z}, s1[2] = {u.y, u.w};  // [j, j + 1]
      for (int i = 0; i < 2; ++i) {
        acc[j + i][0] *= s0[i], acc[j + i][1] *= s1[i];
        acc[j + i][2] *= s0[i], acc[j + i][3] *= s1[i];
      }
    }
  }

  // A consumer warp hands stage s back (one arrival per warp).
  MM_DEVICE static void release(u8* smem, int lane, int s) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(smem, s));
  }

  // Consumer thread ctid (0..kConsumers - 1): warp w = ctid / 32 owns rows 16 w .. 16 w + 15 of
  // the block (slab w % 8 of group w / 8). acc: as TensorCoreGemm's, rows g and g + 8 of the warp's slab against columns
  // 8j + 2t, 8j + 2t + 1. The wgmma span the narrowest multiple of 16 token columns that holds
  // the tile's `rows` (an expert's last tile is rarely full, and the wgmma's time and the
  // promotion's grow with the width); the columns past it stay zero.
  // state: the loop's, across the tiles.
  MM_DEVICE static void consume(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4], int rows,
                                typename Loop::State& state) {
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
    consume_width<BM>(smem, ctid, K, ps, acc, rows, state);
  }

  template <int N>
  MM_DEVICE static void consume_width(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4], int rows,
                                      typename Loop::State& state) {
    if constexpr (N > 16) {
      if (rows <= N - 16) return consume_width<N - 16>(smem, ctid, K, ps, acc, rows, state);
    }
    Loop::template consume_at<N>(smem, ctid, K, ps, acc, state);
  }

  // Consumer thread ctid's share of a tile's Stage2 sums into the output region [BM][ld]: row g of
  // its warp's slab (at column 16 w + g) times that row's scale and `scale`, row g + 8 (at
  // 16 w + g + 8) likewise, each then through its output column's terms (moe/stage_outputs.cuh)
  // with token column n's col(n). scale is a power of two: the product rounds as before.
  template <class Col>
  MM_DEVICE static void stash_rows(const float (&acc)[NT][4], const ExpertWeights& w2, int expert, int col_tile,
                                   float* o, int ld, int ctid, float scale, Col col) {
    const int warp = ctid >> 5, lane = ctid & 31, g = lane >> 2, t = lane & 3;
    const int at = col_tile * kRows + warp * 16;
    const float* row_scale = w2.row_scale + expert * i64(w2.model_dim);
    const float s_lo = row_scale[at + g] * scale, s_hi = row_scale[at + g + 8] * scale;
    const Stage2Column lo = stage2_column(w2, expert, at + g), hi = stage2_column(w2, expert, at + g + 8);
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 2; ++c) {
        const int n = 8 * j + 2 * t + c;
        const float f = col(n);
        float* row = o + n * ld + 16 * warp + g;
        row[0] = lo.out(acc[j][c] * s_lo, f);
        row[8] = hi.out(acc[j][2 + c] * s_hi, f);
      }
  }

  // The producer warpgroup (threads 0..127). The storers (warps 1 to 3, stid 0..95) fill the first
  // kInfos tiles' entries, then per tile, once the consumers have stashed it: store(info, region,
  // stid), the region handed back, and the entry of the tile kInfos on filled in its place
  // (fill(tile, info, stid) writes the rows the epilogue needs, then the entry is published). The
  // copier (warp 0), per tile once its entry is published: lane 0 stages the tile's chunks of the
  // expert's weights (units advance by expert_bytes per expert), the activations once gate.wait
  // returns.
  template <class Fill, class Store, class Gate = FirstTileGate>
  MM_DEVICE static void run_producer(u8* smem, const TileWalk& walk, const u8* a_q, const float* a_scales,
                                     int rows_pad, int K, const u8* units, i64 expert_bytes, Fill fill,
                                     Store store, Gate gate = {}) {
    regs_dealloc<kProducerRegs>();
    const int ptid = threadIdx.x;
    Ring<kInfos> ts;
    if (ptid < 32) {
      Ring<kStages> ps;
      for (int tile = walk.first; tile < walk.total; tile += walk.step, ts.advance()) {
        mbar_wait(tile_full(smem, ts.index), ts.phase);
        if (ptid == 0) {
          const TileInfo<BM>& ti = *info(smem, ts.index);
          const int rows = ti.rows;
          // p_end: the tile's own end (the expert's is the fill's alone); produce and the gate read p0 and rows
          const RoutedTile rt{ti.expert, ti.p0, ti.p0 + rows, ti.col_tile};
          const bool first = tile == walk.first;
          produce(smem, a_q, a_scales, rows_pad, rt.p0, rows, K, units + rt.expert * expert_bytes,
                  rt.col_tile * kGroups, ps, gate.early(first), [&] { gate.wait(rt, rows, first); });
        }
        __syncwarp();
      }
    } else {
      const int stid = ptid - 32;
      auto fill_entry = [&](int tile, int b) {
        const RoutedTile rt =
            routed_tile(tile, walk.m_tiles, BM, walk.tile_offsets, walk.expert_offsets, walk.experts);
        TileInfo<BM>* ti = info(smem, b);
        fill(rt, ti, stid);
        if (stid == 0) {
          ti->expert = rt.expert, ti->col_tile = rt.col_tile;
          ti->rows = min(rt.p_end - rt.p0, BM), ti->p0 = rt.p0;
        }
        mbar_arrive(tile_full(smem, b));  // releases this thread's writes to the entry
      };
      int ahead = walk.first;
      for (int b = 0; b < kInfos && ahead < walk.total; ++b, ahead += walk.step) fill_entry(ahead, b);
      u32 phase = 0;
      for (int tile = walk.first; tile < walk.total; tile += walk.step, ts.advance(), phase ^= 1) {
        mbar_wait(out_full(smem), phase);
        store(*info(smem, ts.index), region(smem), stid);
        mbar_arrive(out_empty(smem));
        if (ahead < walk.total) {
          named_barrier(kStorersBarrier, kStorers);  // every storer is done with the entry
          fill_entry(ahead, ts.index);
          ahead += walk.step;
        }
      }
    }
  }

  // The consumer warpgroups (threads 128 and up): per tile, the main loop, then, once the storers
  // are done with the region, stash(info, acc, ctid, region) and on to the next tile.
  template <class Stash>
  MM_DEVICE static void run_consumers(u8* smem, const TileWalk& walk, int K, Stash stash) {
    regs_alloc<kConsumerRegs>();
    const int ctid = threadIdx.x - kProducers;
    Ring<kStages> ps;
    Ring<kInfos> ts;
    typename Loop::State state;
    u32 phase = 0;
    for (int tile = walk.first; tile < walk.total; tile += walk.step, ts.advance(), phase ^= 1) {
      mbar_wait(tile_full(smem, ts.index), ts.phase);
      const TileInfo<BM>& ti = *info(smem, ts.index);
      float acc[NT][4];
      consume(smem, ctid, K, ps, acc, ti.rows, state);
      mbar_wait(out_empty(smem), phase ^ 1);
      stash(ti, acc, ctid, region(smem));
      mbar_arrive(out_full(smem));  // releases this thread's writes to the region
    }
    state.finish(ctid >> 7);
  }
};

}  // namespace megamoe
