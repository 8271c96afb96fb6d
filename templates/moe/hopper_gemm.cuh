// The Hopper main loop of both expert GEMMs: warp-specialised, wgmma on fp8, weights as the A
// operand (swap AB: 128 weight rows per block, the routed tokens on N).
//
// Warpgroup 0 produces and stores. Per tile its first warp works out the rows' destinations (a
// four-entry TileInfo ring); per 128-k chunk one thread starts three bulk copies on the stage's
// `full` mbarrier: the block's weight words and exponents (layout v3: 8 KB and 512 B in one
// unit) and the tile's activations and their scales (routed layout, moe/routed_rows.cuh:
// BN x 128 B already in the 128-byte swizzle, and BN x 16 B). Warpgroups 1
// and 2 consume: each owns 64 weight rows (four slabs); while the wgmma of one chunk run they
// read the next chunk's words and turn them into e4m3 fragments in registers (two byte permutes
// per 8 values, block exponent folded in). The partial sums of an activation scale block (one
// chunk for h, kScaleChunks chunks for x) are scaled by the activations' scales and added to
// the accumulators (the weights' row scales are left to the epilogue);
// `empty` barriers hand the stages back. At the end of a tile the consumers stash their sums (scaled; Stage1's with the
// activation applied) in the shared output region and go on to the next tile; warpgroup 0's
// other three warps (the storers) finish the epilogue from there (quantization, stores),
// overlapped with the next tile's wgmma. A tile's wgmma span the narrowest multiple of 16 token
// columns that holds its routed rows (the main loop exists at every width up to BN).
// Producer, consumers and storers walk the same tiles and chunks, so one running stage index
// keeps them in step across tiles, and the producer runs ahead into the next tile.
// kResident (the fp8-resident kernels, docs/layer.md): the weights come as the e4m3 copy
// prepare_weights makes (a 16 KB unit per chunk, the values the conversion above would make), and
// both wgmma operands are read from shared memory: the consumers only issue, promote and stash.
// Each issues a whole scale block's chunks and waits once; the two warpgroups issue in turn
// (IssueTurns), so one promotes or stashes while the other's wgmma run.
#pragma once
#include "common/e2m1_to_e4m3.cuh"
#include "common/numerics.cuh"
#include "interface/kernel_constants.cuh"
#include "moe/routed_tiles.cuh"
#include "hopper/pipeline.cuh"
#include "hopper/wgmma.cuh"
#include "hopper/wgmma_ss_e4m3.cuh"

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

// The fp8-resident consumers' order of issue: the first warpgroup issues a scale block's wgmma,
// then the second, then the first its next block, and so on across tiles, so that the tensor
// cores always have the other's wgmma queued while one waits, promotes or stashes. Hardware
// barriers 2 (the first has issued) and 3 (the second has); the storers use 1. Every consumer
// thread keeps one, issues through it and calls finish() after its last tile.
struct IssueTurns {
  bool first = true;
  MM_DEVICE void before(int wg) {
    if (wg == 1) named_barrier(2, 256);
    else if (!first) named_barrier(3, 256);
  }
  MM_DEVICE void after(int wg) {
    named_barrier_arrive(wg == 0 ? 2 : 3, 256);
    first = false;
  }
  MM_DEVICE void finish(int wg) {  // the second's last turn, which no later block of the first awaits
    if (wg == 0 && !first) named_barrier(3, 256);
  }
};

// What the consumers' epilogue needs of a tile, written by the producers.
template <int BN>
struct TileInfo {
  int expert, col_tile;
  int rows;          // columns 0 .. rows - 1 have routed rows (the rest lie past the expert's end)
  int out[BN];       // Stage1: the output row of token column n; Stage2: its wire slot; -1 for none
  float weight[BN];  // Stage2: the route weight
};

// kBlocksPerSM 2 (small token tiles): two blocks share an SM, twice the consumer warps to hide
// the latencies of a chunk, with the registers and shared memory halved. kScaleChunks: chunks of
// 128 k per activation scale block (1, or an even count: the wgmma of a block's chunks sum into
// one set of partial sums, promoted once per block).
template <int BN, int kStages, int kBlocksPerSM, int kScaleChunks = 1, bool kResident = false>
struct HopperGemm {
  static constexpr int kThreads = kHopperThreads, kProducers = 128, kConsumers = 256, kRows = kWeightRowsPerBlock;
  static constexpr int kBN = BN;
  static constexpr int kFillers = 32, kStorers = kProducers - kFillers;  // warp 0; warps 1 to 3
  // TileInfo entries: the filler (and so the producer's copies) runs up to three tiles ahead of
  // the storers, so that the consumers never wait for a tile's first chunks.
  static constexpr int kInfos = kHopperTileInfos;
  // 128 x kProducerRegs + 256 x kConsumerRegs <= 384 x the launch bound's registers (168 or 80):
  // setmaxnreg.inc takes from what .dec gave back.
  static constexpr int kProducerRegs = kBlocksPerSM == 1 ? 40 : 32;
  static constexpr int kConsumerRegs = kBlocksPerSM == 1 ? 232 : 104;
  static constexpr int NT = BN / 8;
  // Small tiles at one block per SM also keep two chunks' wgmma in flight, where the registers
  // hold a second set of partial sums: the older chunk is promoted while the newer one runs
  // (consume_pairs).
  static constexpr bool kTwoInFlight = kBlocksPerSM == 1 && BN <= 80 && kScaleChunks == 1 && !kResident;
  static_assert(kScaleChunks == 1 || kScaleChunks % 2 == 0, "scale blocks of one chunk or of an even count");
  // Two sets of fragments beside the sums and one set of partial sums fit 232 registers up to
  // 176 tokens.
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 176, "BN: a multiple of 16 tokens up to 176");

  // Shared memory (from a 1024-aligned base): the barriers (512 bytes) and the TileInfo ring, then kStages
  // stages of [activations BN x 128 B, swizzled][weight words 8 x 1 KB][exponents 8 x 64 B]
  // [activation scales BN x 4 f32 (2 used)], each stage 1024-aligned as the swizzle needs, then the
  // epilogue region (interface/kernel_constants.cuh: the host sizes the launch from the same functions).
  // kResident: the unit is the chunk's 128 rows of e4m3 (kWordBytes of them, no exponents), at a
  // 1024-aligned offset (BN x 128 bytes in): the swizzle's atom, as the A descriptor needs.
  static constexpr int kUnitBytes = kResident ? int(kFp8ResidentUnitBytes) : int(kLayoutV3UnitBytes);
  static constexpr int kActBytes = BN * 128, kWordBytes = kResident ? kUnitBytes : kSlabGroup * kSlabWordBytes,
                       kExpBytes = kResident ? 0 : kSlabGroup * kSlabExpBytes, kScaleBytes = BN * 16;
  static constexpr int kWordsAt = kActBytes, kExpsAt = kWordsAt + kWordBytes, kScalesAt = kExpsAt + kExpBytes;
  static constexpr int kStageBytes = hopper_stage_bytes(BN, kResident);
  static constexpr int kHeadBytes = hopper_head_bytes(BN);
  static constexpr int kPipelineBytes = hopper_pipeline_bytes(BN, kStages, kResident);
  static_assert(kStageBytes == round_up_1024(kScalesAt + kScaleBytes), "a stage's parts, 1024-aligned");
  static_assert(int(sizeof(TileInfo<BN>)) == hopper_tile_info_bytes(BN), "the TileInfo ring's size");
  static_assert(2 * kStages + 2 * kInfos + 2 <= kHopperBarrierBytes / 8, "barriers fit their 512 bytes");
  static_assert(kWordsAt % 1024 == 0, "the weights' chunk starts on a swizzle atom");

  // Bytes of one expert's weights as the kernel reads them; the unit of a chunk within them.
  MM_DEVICE static i64 expert_bytes(i64 rows, int k) {
    return kResident ? fp8_resident_expert_bytes(rows, k) : layout_v3_expert_bytes(rows, k);
  }
  MM_DEVICE static const u8* unit(const u8* units, int group, int chunk, int chunks) {
    return kResident ? units + ((i64)group * chunks + chunk) * kFp8ResidentUnitBytes
                     : layout_v3_unit(units, group, chunk, chunks);
  }

  MM_DEVICE static u8* align(u8* raw) {
    const u32 a = sm_addr(raw);
    return raw + ((1024 - (a & 1023)) & 1023);
  }
  MM_DEVICE static u64* full(u8* smem, int s) { return reinterpret_cast<u64*>(smem) + s; }
  MM_DEVICE static u64* empty(u8* smem, int s) { return reinterpret_cast<u64*>(smem) + kStages + s; }
  MM_DEVICE static u64* tile_full(u8* smem, int b) { return reinterpret_cast<u64*>(smem) + 2 * kStages + b; }
  MM_DEVICE static u64* tile_empty(u8* smem, int b) {
    return reinterpret_cast<u64*>(smem) + 2 * kStages + kInfos + b;
  }
  MM_DEVICE static u64* out_full(u8* smem) { return reinterpret_cast<u64*>(smem) + 2 * kStages + 2 * kInfos; }
  MM_DEVICE static u64* out_empty(u8* smem) { return reinterpret_cast<u64*>(smem) + 2 * kStages + 2 * kInfos + 1; }
  MM_DEVICE static TileInfo<BN>* info(u8* smem, int b) { return reinterpret_cast<TileInfo<BN>*>(smem + kHopperBarrierBytes) + b; }
  MM_DEVICE static u8* stage(u8* smem, int s) { return smem + kHeadBytes + s * kStageBytes; }
  MM_DEVICE static float* region(u8* smem) { return reinterpret_cast<float*>(smem + kPipelineBytes); }

  // All threads: before the roles split.
  MM_DEVICE static void init(u8* smem) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) {
        mbar_init(full(smem, s), 1);                 // the producer's expect_tx; then the bytes
        mbar_init(empty(smem, s), kConsumers / 32);  // one arrival per consumer warp
      }
      for (int b = 0; b < kInfos; ++b) {
        mbar_init(tile_full(smem, b), kFillers);
        mbar_init(tile_empty(smem, b), kStorers);  // the entry is read until the tile is stored
      }
      mbar_init(out_full(smem), kConsumers);
      mbar_init(out_empty(smem), kStorers);
      mbar_init_fence();
    }
    __syncthreads();
  }

  // Whether a chunk's stage holds the scales: the last chunk of each scale block (the block's
  // scales are repeated in each of its chunks' entries; one copy of them is enough).
  MM_DEVICE static bool has_scales(int chunk) { return chunk % kScaleChunks == kScaleChunks - 1; }

  // One producer thread: stages the K / 128 chunks of a tile whose rows start at routed row p0.
  // a_q / a_scales: the routed activations (rows_pad rows per chunk); units: the expert's weights
  // (layout v3, or the fp8-resident copy), group the block's group of 8 slabs (its weight tile).
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
    const u32 rows8 = u32(min((rows + 7) & ~7, BN)), act_bytes = rows8 * 128, scale_bytes = rows8 * 16;
    auto request_weights = [&](int chunk, const Ring<kStages>& r) {
      mbar_wait(empty(smem, r.index), r.phase ^ 1);
      u8* st = stage(smem, r.index);
      u64* bar = full(smem, r.index);
      // layout v3: the block's words of the chunk, then their exponents, as the stage keeps them
      static_assert(kExpsAt == kWordsAt + kWordBytes && kWordBytes + kExpBytes == kUnitBytes,
                    "a unit lands in one copy");
      mbar_arrive_expect_tx(bar, kUnitBytes + act_bytes + (has_scales(chunk) ? scale_bytes : 0u));
      bulk_copy_g2s(st + kWordsAt, unit(units, group, chunk, chunks), kUnitBytes, bar);
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
      if (has_scales(chunk)) bulk_copy_g2s(st + kScalesAt, a_scales + ((i64)chunk * rows_pad + p0) * 4, scale_bytes, bar);
    }
  }

  // A block's first tile waits for the previous kernel here, and lets the next one be scheduled.
  MM_DEVICE static void wait_previous_kernel() {
    mm_wait_prior_grid();
    mm_release_dependents();
  }

  // The e4m3 fragments of the warp's slab for the four 32-k steps of a stage.
  MM_DEVICE static void load_fragments(const u8* st, int warp, int lane, u32 (&a)[4][4]) {
    const int g = lane >> 2;
    const uint4* wq = reinterpret_cast<const uint4*>(st + kWordsAt + warp * 1024 + lane * 32);
    const uint4 w_lo = wq[0], w_hi = wq[1];
    const u32* eq = reinterpret_cast<const u32*>(st + kExpsAt + warp * 64);
    const u32 e_lo = eq[g], e_hi = eq[g + 8];
    const u32 lo[4] = {w_lo.x, w_lo.y, w_lo.z, w_lo.w}, hi[4] = {w_hi.x, w_hi.y, w_hi.z, w_hi.w};
    for (int kb = 0; kb < 4; ++kb) {
      mm_e2m1x8_to_e4m3(lo[kb], mm_signed_byte(e_lo, kb), a[kb][0], a[kb][2]);
      mm_e2m1x8_to_e4m3(hi[kb], mm_signed_byte(e_hi, kb), a[kb][1], a[kb][3]);
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
  // the next chunk's conversion (step), so the first multiply-adds need not wait for a load.
  // p: the first PT of acc's NT column groups (the tile's width, see consume).
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

  // Starts the four wgmma of a stage, 32 k each, on the first 8 PT token columns into p (added to
  // what p holds with accumulate).
  template <int PT>
  MM_DEVICE static void issue(const u8* st, const u32 (&a)[4][4], float (&p)[PT][4], bool accumulate = false) {
    const u64 desc = wg_desc_sw128(st);  // + 2 per 32 k: the address field counts 16 bytes
    wg_fence_acc(p);
    wg_fence();
    for (int kb = 0; kb < 4; ++kb) WgmmaE4m3<8 * PT>::mma(p, a[kb], desc + 2 * kb, accumulate || kb > 0);
    wg_commit();
    wg_fence_acc(p);
  }

  // kResident: the four wgmma of a stage for consumer warpgroup wg, its 64 weight rows and the
  // tokens both from shared memory.
  template <int PT>
  MM_DEVICE static void issue_resident(const u8* st, int wg, float (&p)[PT][4], bool accumulate) {
    const u64 desc_a = wg_desc_sw128(st + kWordsAt + wg * (kWordBytes / 2)), desc_b = wg_desc_sw128(st);
    wg_fence_acc(p);
    wg_fence();
    for (int kb = 0; kb < 4; ++kb) WgmmaE4m3SS<8 * PT>::mma(p, desc_a + 2 * kb, desc_b + 2 * kb, accumulate || kb > 0);
    wg_commit();
    wg_fence_acc(p);
  }

  MM_DEVICE static void release(u8* smem, int lane, int s) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(smem, s));
  }

  // Waits for stage r's copies and converts its fragments.
  MM_DEVICE static void fetch(u8* smem, const Ring<kStages>& r, int warp, int lane, u32 (&a)[4][4]) {
    mbar_wait(full(smem, r.index), r.phase);
    load_fragments(stage(smem, r.index), warp, lane, a);
  }

  // Once the wgmma writing p are waited for: p promoted into acc (the scales from st, stage s),
  // the stage handed back.
  // kFirst: first holds the first pair of scales (see promote); otherwise promote loads them all.
  template <bool kFirst = false, int PT>
  MM_DEVICE static void retire(u8* smem, int lane, const u8* st, int s, float (&p)[PT][4], float (&acc)[NT][4],
                               float4 first = {}) {
    wg_fence_acc(p);
    promote<kFirst>(acc, p, st, lane & 3, first);
    release(smem, lane, s);
  }

  // One chunk in flight: the next chunk's fragments are converted while its wgmma run.
  template <int N>
  MM_DEVICE static void step(u8* smem, int warp, int lane, bool has_next, Ring<kStages>& ps, const u32 (&a)[4][4],
                             u32 (&a_next)[4][4], float (&acc)[NT][4]) {
    u8* st = stage(smem, ps.index);
    float p[N / 8][4];
    issue(st, a, p);
    Ring<kStages> next = ps;
    next.advance();
    const float4 first = scale_pair(st, lane & 3, 0);  // before the conversion: under it
    if (has_next) fetch(smem, next, warp, lane, a_next);
    wg_wait<0>();
    retire<true>(smem, lane, st, ps.index, p, acc, first);
    ps = next;
  }

  // Consumer thread ctid (0..255): warp ctid / 32 owns slab slab0 + ctid / 32 (rows 16 w .. 16 w
  // + 15 of the block). acc: as TensorCoreGemm's, rows g and g + 8 of the warp's slab against columns
  // 8j + 2t, 8j + 2t + 1. The wgmma span the narrowest multiple of 16 token columns that holds
  // the tile's `rows` (an expert's last tile is rarely full, and the wgmma's time and the
  // promotion's grow with the width); the columns past it stay zero.
  // turns: the order of issue between the warpgroups (kResident only).
  MM_DEVICE static void consume(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4], int rows,
                                IssueTurns& turns) {
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
    consume_width<BN>(smem, ctid, K, ps, acc, rows, turns);
  }

  template <int N>
  MM_DEVICE static void consume_width(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4], int rows,
                                      IssueTurns& turns) {
    if constexpr (N > 16) {
      if (rows <= N - 16) return consume_width<N - 16>(smem, ctid, K, ps, acc, rows, turns);
    }
    consume_at<N>(smem, ctid, K, ps, acc, turns);
  }

  // The main loop of a tile at width N.
  template <int N>
  MM_DEVICE static void consume_at(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4],
                                   IssueTurns& turns) {
    const int warp = ctid >> 5, lane = ctid & 31;
    const int chunks = K / 128;
    if constexpr (kResident) {
      consume_resident<N>(smem, ctid >> 7, lane, chunks, ps, acc, turns);
      return;
    }
    u32 a0[4][4], a1[4][4];
    fetch(smem, ps, warp, lane, a0);
    if constexpr (kScaleChunks > 1) {
      consume_blocks<N>(smem, warp, lane, chunks, ps, a0, a1, acc);
    } else if constexpr (kTwoInFlight) {
      consume_pairs<N>(smem, warp, lane, chunks, ps, a0, a1, acc);
      if (chunks % 2) step<N>(smem, warp, lane, false, ps, a0, a1, acc);  // the last chunk of an odd count
    } else {
      for (int chunk = 0; chunk < chunks; chunk += 2) {  // two at a time: the fragment buffers alternate
        step<N>(smem, warp, lane, chunk + 1 < chunks, ps, a0, a1, acc);
        if (chunk + 1 < chunks) step<N>(smem, warp, lane, chunk + 2 < chunks, ps, a1, a0, acc);
      }
    }
  }

  // kResident: per scale block, its chunks' wgmma issued back to back in this warpgroup's turn and
  // waited for once, the sums promoted with the scales of the block's last chunk, its stages handed
  // back.
  template <int N>
  MM_DEVICE static void consume_resident(u8* smem, int wg, int lane, int chunks, Ring<kStages>& ps,
                                         float (&acc)[NT][4], IssueTurns& turns) {
    float p[N / 8][4];
    for (int chunk = 0; chunk < chunks; chunk += kScaleChunks) {
      Ring<kStages> r = ps, last = ps;
      turns.before(wg);
      for (int i = 0; i < kScaleChunks; ++i, r.advance()) {
        mbar_wait(full(smem, r.index), r.phase);
        issue_resident(stage(smem, r.index), wg, p, i > 0);
        last = r;
      }
      turns.after(wg);
      wg_wait<0>();
      wg_fence_acc(p);
      promote<false>(acc, p, stage(smem, last.index), lane & 3, {});
      for (int i = 0; i < kScaleChunks; ++i, ps.advance()) release(smem, lane, ps.index);
    }
  }

  // kScaleChunks > 1: each chunk's wgmma start before the previous chunk's are waited for and sum
  // into the block's partial sums; once they are, the previous chunk's fragments and stage are
  // free (the next chunk is converted into those fragments); at a block's last chunk all are
  // waited for and the sums promoted. Chunks go in pairs so that the fragment buffers alternate
  // in registers; a block holds whole pairs. a0 holds the first chunk's fragments on entry.
  template <int N>
  MM_DEVICE static void consume_blocks(u8* smem, int warp, int lane, int chunks, Ring<kStages>& ps, u32 (&a0)[4][4],
                                       u32 (&a1)[4][4], float (&acc)[NT][4]) {
    float p[N / 8][4];
    auto chunk_step = [&](int chunk, Ring<kStages>& prev, u32 (&a)[4][4], u32 (&a_next)[4][4]) {
      const bool block_start = chunk % kScaleChunks == 0, block_end = has_scales(chunk);
      u8* st = stage(smem, ps.index);
      issue(st, a, p, !block_start);
      wg_wait<1>();  // the previous chunk's wgmma are done: its fragments and stage are free
      if (!block_start) release(smem, lane, prev.index);
      Ring<kStages> next = ps;
      next.advance();
      if (chunk + 1 < chunks) fetch(smem, next, warp, lane, a_next);
      if (block_end) {
        wg_wait<0>();
        retire(smem, lane, st, ps.index, p, acc);
      }
      prev = ps;
      ps = next;
    };
    Ring<kStages> prev = ps;
    for (int chunk = 0; chunk < chunks; chunk += 2) {
      chunk_step(chunk, prev, a0, a1);
      chunk_step(chunk + 1, prev, a1, a0);
    }
  }

  // kTwoInFlight: chunks in pairs, the second's wgmma started before the first is promoted; an
  // odd count leaves the last chunk, its fragments in a0, to the caller. Every pair ends with all
  // its wgmma waited for: a group left in flight across the loop's back edge makes ptxas
  // serialise the wgmma (C7514). a0 holds the first chunk's fragments on entry.
  template <int N>
  MM_DEVICE static void consume_pairs(u8* smem, int warp, int lane, int chunks, Ring<kStages>& ps, u32 (&a0)[4][4],
                                      u32 (&a1)[4][4], float (&acc)[NT][4]) {
    float p0[N / 8][4], p1[N / 8][4];
    for (int chunk = 0; chunk + 1 < chunks; chunk += 2) {
      Ring<kStages> second = ps, after = ps;
      second.advance();
      after.advance(), after.advance();
      u8* st0 = stage(smem, ps.index);
      u8* st1 = stage(smem, second.index);
      issue(st0, a0, p0);
      fetch(smem, second, warp, lane, a1);
      issue(st1, a1, p1);
      wg_wait<1>();
      retire(smem, lane, st0, ps.index, p0, acc);
      if (chunk + 2 < chunks) fetch(smem, after, warp, lane, a0);
      wg_wait<0>();
      retire(smem, lane, st1, second.index, p1, acc);
      ps = after;
    }
  }

  // Consumer thread ctid's share of a tile's sums into the output region [BN][ld]: row g of its
  // warp's slab (at column 16 w + g) times that row's scale, row g + 8 (at 16 w + g + 8) times
  // its own, token column n times col(n). row_scale: the expert's weight-row scales.
  template <class Col>
  MM_DEVICE static void stash_rows(const float (&acc)[NT][4], const float* row_scale, int col_tile, float* o, int ld,
                                   int ctid, Col col) {
    const int warp = ctid >> 5, lane = ctid & 31, g = lane >> 2, t = lane & 3;
    const float* rs = row_scale + (col_tile * 8 + warp) * 16;
    const float s_lo = rs[g], s_hi = rs[g + 8];
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 2; ++c) {
        const int n = 8 * j + 2 * t + c;
        const float f = col(n);
        float* row = o + n * ld + 16 * warp + g;
        row[0] = acc[j][c] * s_lo * f;
        row[8] = acc[j][2 + c] * s_hi * f;
      }
  }

  // The producer warpgroup (threads 0..127). Warp 0, per tile, once a TileInfo entry is free:
  // fill(tile, info, lane) writes the rows the epilogue needs, the entry is published, and lane 0
  // stages the tile's chunks of the expert's weights (units advance by expert_bytes per expert),
  // the activations once gate.wait returns. Warps 1 to 3, per tile, once the consumers have
  // stashed it: store(info, region, stid) with stid 0..95, then the region and the entry are
  // handed back.
  template <class Fill, class Store, class Gate = FirstTileGate>
  MM_DEVICE static void run_producer(u8* smem, const TileWalk& walk, const u8* a_q, const float* a_scales,
                                     int rows_pad, int K, const u8* units, i64 expert_bytes, Fill fill,
                                     Store store, Gate gate = {}) {
    regs_dealloc<kProducerRegs>();
    const int ptid = threadIdx.x;
    Ring<kInfos> ts;
    if (ptid < kFillers) {
      Ring<kStages> ps;
      for (int tile = walk.first; tile < walk.total; tile += walk.step, ts.advance()) {
        const bool first = tile == walk.first;
        mbar_wait(tile_empty(smem, ts.index), ts.phase ^ 1);
        const RoutedTile rt =
            routed_tile(tile, walk.m_tiles, BN, walk.tile_offsets, walk.expert_offsets, walk.experts);
        TileInfo<BN>* ti = info(smem, ts.index);
        fill(rt, ti, ptid);
        if (ptid == 0) ti->expert = rt.expert, ti->col_tile = rt.col_tile, ti->rows = min(rt.p_end - rt.p0, BN);
        mbar_arrive(tile_full(smem, ts.index));  // releases this thread's writes to the entry
        if (ptid == 0) {
          const int rows = min(rt.p_end - rt.p0, BN);
          produce(smem, a_q, a_scales, rows_pad, rt.p0, rows, K, units + rt.expert * expert_bytes, rt.col_tile, ps,
                  gate.early(first), [&] { gate.wait(rt, rows, first); });
        }
        __syncwarp();
      }
    } else {
      u32 phase = 0;
      for (int tile = walk.first; tile < walk.total; tile += walk.step, ts.advance(), phase ^= 1) {
        mbar_wait(out_full(smem), phase);
        store(*info(smem, ts.index), region(smem), ptid - kFillers);
        mbar_arrive(out_empty(smem));
        mbar_arrive(tile_empty(smem, ts.index));
      }
    }
  }

  // The consumer warpgroups (threads 128..383): per tile, the main loop, then, once the storers
  // are done with the region, stash(info, acc, ctid, region) and on to the next tile.
  template <class Stash>
  MM_DEVICE static void run_consumers(u8* smem, const TileWalk& walk, int K, Stash stash) {
    regs_alloc<kConsumerRegs>();
    const int ctid = threadIdx.x - kProducers;
    Ring<kStages> ps;
    Ring<kInfos> ts;
    IssueTurns turns;
    u32 phase = 0;
    for (int tile = walk.first; tile < walk.total; tile += walk.step, ts.advance(), phase ^= 1) {
      mbar_wait(tile_full(smem, ts.index), ts.phase);
      const TileInfo<BN>& ti = *info(smem, ts.index);
      float acc[NT][4];
      consume(smem, ctid, K, ps, acc, ti.rows, turns);
      mbar_wait(out_empty(smem), phase ^ 1);
      stash(ti, acc, ctid, region(smem));
      mbar_arrive(out_full(smem));  // releases this thread's writes to the region
    }
    turns.finish(ctid >> 7);
  }
};

}  // namespace megamoe
