// The Hopper main loop of both expert GEMMs: warp-specialised, wgmma on fp8, weights as the A
// operand (swap AB: 128 weight rows per block, the routed tokens on N).
//
// Warpgroup 0 produces. Per tile it works out the routed rows (where the consumers' epilogue
// will need them too, handed over in a two-entry TileInfo ring), then per 128-k chunk one thread
// starts the bulk copies of the block's weight words and exponents (layout v2: 8 KB and 512 B,
// contiguous) on the stage's `full` mbarrier, and all 128 threads gather the tile's activation rows (128
// bytes each, placed in the 128-byte swizzle so the tensor cores read them directly) and their
// two f32 block scales; each thread's gathers arrive on the same barrier when they land.
// Warpgroups 1 and 2 consume: each owns 64 weight rows (four v2 slabs); while the wgmma of one
// chunk runs they read the next chunk's words and turn them into e4m3 fragments in registers
// (two byte permutes per 8 values, block exponent folded in). The partial sums of each 64 k are
// scaled by the activation block scales and added to the accumulators (the weights' row scales
// are left to the epilogue); `empty` barriers hand the stages back. Producer and consumers walk
// the same tiles and chunks, so one running stage index keeps them in step across tiles, and the
// producer runs ahead into the next tile while the consumers finish an epilogue.
#pragma once
#include "common/numerics.cuh"
#include "moe/mma_gemm.cuh"
#include "sm90/pipeline.cuh"
#include "sm90/wgmma.cuh"

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

// What the consumers' epilogue needs of a tile, written by the producers.
template <int BN>
struct TileInfo {
  int expert, col_tile;
  int out[BN];       // Stage1: the output row of token column n; Stage2: its wire slot; -1 for none
  float weight[BN];  // Stage2: the route weight
};

template <int BN, int kStages>
struct WgmmaGemm {
  static constexpr int kThreads = 384, kProducers = 128, kConsumers = 256, kRows = 128;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int NT = BN / 8;
  static_assert(BN == 8 || BN == 16 || BN == 32 || BN == 64 || BN == 128, "BN: 8, 16, 32, 64 or 128 tokens");

  // Shared memory (from a 1024-aligned base): the barriers and the TileInfo ring, then kStages
  // stages of [activations BN x 128 B, swizzled][weight words 8 x 1 KB][exponents 8 x 64 B]
  // [activation scales BN x 2 f32], each stage 1024-aligned as the swizzle needs, then the
  // epilogue region. src/codegen/kernel_catalog.cpp mirrors the sizes.
  static constexpr int kActBytes = BN * 128, kWordBytes = 8 * 1024, kExpBytes = 8 * 64, kScaleBytes = BN * 8;
  static constexpr int kWordsAt = kActBytes, kExpsAt = kWordsAt + kWordBytes, kScalesAt = kExpsAt + kExpBytes;
  static constexpr int kStageBytes = (kScalesAt + kScaleBytes + 1023) / 1024 * 1024;
  static constexpr int kHeadBytes = (256 + 2 * int(sizeof(TileInfo<BN>)) + 1023) / 1024 * 1024;
  static constexpr int kPipelineBytes = kHeadBytes + kStages * kStageBytes;
  static_assert(2 * kStages + 4 <= 32, "barriers fit their 256 bytes");

  MM_DEVICE static u8* align(u8* raw) {
    const u32 a = sm_addr(raw);
    return raw + ((1024 - (a & 1023)) & 1023);
  }
  MM_DEVICE static u64* full(u8* smem, int s) { return reinterpret_cast<u64*>(smem) + s; }
  MM_DEVICE static u64* empty(u8* smem, int s) { return reinterpret_cast<u64*>(smem) + kStages + s; }
  MM_DEVICE static u64* tile_full(u8* smem, int b) { return reinterpret_cast<u64*>(smem) + 2 * kStages + b; }
  MM_DEVICE static u64* tile_empty(u8* smem, int b) { return reinterpret_cast<u64*>(smem) + 2 * kStages + 2 + b; }
  MM_DEVICE static TileInfo<BN>* info(u8* smem, int b) { return reinterpret_cast<TileInfo<BN>*>(smem + 256) + b; }
  MM_DEVICE static u8* stage(u8* smem, int s) { return smem + kHeadBytes + s * kStageBytes; }
  MM_DEVICE static float* region(u8* smem) { return reinterpret_cast<float*>(smem + kPipelineBytes); }

  // All threads: before the roles split.
  MM_DEVICE static void init(u8* smem) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) {
        mbar_init(full(smem, s), kProducers + 1);    // every producer's gathers, and the expect_tx
        mbar_init(empty(smem, s), kConsumers / 32);  // one arrival per consumer warp
      }
      for (int b = 0; b < 2; ++b) {
        mbar_init(tile_full(smem, b), kProducers);
        mbar_init(tile_empty(smem, b), kConsumers / 32);
      }
      mbar_init_fence();
    }
    __syncthreads();
  }

  // Producer thread ptid (0..127): stages the K / 128 chunks of one tile. rows[n] (shared): the
  // activation row of token column n, or -1 (zeros). a_scales: f32 per 64 k of each row.
  // words / exps: the expert's layout-v2 arrays, slab0 the block's first slab.
  MM_DEVICE static void produce(u8* smem, int ptid, const u8* a_q, const float* a_scales, const int* rows, int K,
                                const u8* words, const signed char* exps, int slab0, Ring<kStages>& ps) {
    const int chunks = K / 128, kb64 = K / 64;
    for (int chunk = 0; chunk < chunks; ++chunk, ps.advance()) {
      mbar_wait(empty(smem, ps.index), ps.phase ^ 1);
      u8* st = stage(smem, ps.index);
      u64* bar = full(smem, ps.index);
      if (ptid == 0) {  // layout v2 keeps the block's 8 slabs of a chunk together
        const i64 piece = (i64)slab0 * chunks + chunk * 8;
        mbar_arrive_expect_tx(bar, kWordBytes + kExpBytes);
        bulk_copy_g2s(st + kWordsAt, words + piece * 1024, kWordBytes, bar);
        bulk_copy_g2s(st + kExpsAt, exps + piece * 64, kExpBytes, bar);
      }
      for (int i = ptid; i < BN * 8; i += kProducers) {
        const int n = i >> 3, part = i & 7, row = rows[n];
        gather16(st + n * 128 + ((part ^ (n & 7)) << 4),
                 a_q + (row >= 0 ? (i64)row * K + chunk * 128 + part * 16 : 0), row >= 0);
      }
      for (int n = ptid; n < BN; n += kProducers) {
        const int row = rows[n];
        gather8(st + kScalesAt + n * 8, a_scales + (row >= 0 ? (i64)row * kb64 + chunk * 2 : 0), row >= 0);
      }
      gather_arrive(bar);
    }
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
      mm_e2m1x8_to_e4m3(lo[kb], int((signed char)(e_lo >> (8 * kb))), a[kb][0], a[kb][2]);
      mm_e2m1x8_to_e4m3(hi[kb], int((signed char)(e_hi >> (8 * kb))), a[kb][1], a[kb][3]);
    }
  }

  // acc += p0 * (scale of the first 64 k) + p1 * (scale of the second), per token column.
  MM_DEVICE static void promote(float (&acc)[NT][4], const float (&p0)[NT][4], const float (&p1)[NT][4],
                                const u8* st, int t) {
    const float* scales = reinterpret_cast<const float*>(st + kScalesAt);
    for (int j = 0; j < NT; ++j) {
      // columns 8j + 2t and 8j + 2t + 1, each (first 64 k, second 64 k)
      const float4 s = *reinterpret_cast<const float4*>(scales + (8 * j + 2 * t) * 2);
      acc[j][0] += p0[j][0] * s.x + p1[j][0] * s.y, acc[j][1] += p0[j][1] * s.z + p1[j][1] * s.w;
      acc[j][2] += p0[j][2] * s.x + p1[j][2] * s.y, acc[j][3] += p0[j][3] * s.z + p1[j][3] * s.w;
    }
  }

  // Starts the four wgmma of a stage: k 0..63 into p0, k 64..127 into p1.
  MM_DEVICE static void issue(const u8* st, const u32 (&a)[4][4], float (&p0)[NT][4], float (&p1)[NT][4]) {
    const u64 desc = wg_desc_sw128(st);  // + 2 per 32 k: the address field counts 16 bytes
    wg_fence_acc(p0);
    wg_fence_acc(p1);
    wg_fence();
    WgmmaE4m3<BN>::mma(p0, a[0], desc + 0, 0);
    WgmmaE4m3<BN>::mma(p0, a[1], desc + 2, 1);
    WgmmaE4m3<BN>::mma(p1, a[2], desc + 4, 0);
    WgmmaE4m3<BN>::mma(p1, a[3], desc + 6, 1);
    wg_commit();
    wg_fence_acc(p0);
    wg_fence_acc(p1);
  }

  // One stage: its wgmma run while the next stage's fragments are converted (into a_next).
  MM_DEVICE static void step(u8* smem, int warp, int lane, bool has_next, Ring<kStages>& ps, const u32 (&a)[4][4],
                             u32 (&a_next)[4][4], float (&acc)[NT][4]) {
    u8* st = stage(smem, ps.index);
    float p0[NT][4], p1[NT][4];
    issue(st, a, p0, p1);
    Ring<kStages> next = ps;
    next.advance();
    if (has_next) {
      mbar_wait(full(smem, next.index), next.phase);
      fence_proxy_async();  // the gathered activations came through the generic proxy
      load_fragments(stage(smem, next.index), warp, lane, a_next);
    }
    wg_wait<0>();
    wg_fence_acc(p0);
    wg_fence_acc(p1);
    promote(acc, p0, p1, st, lane & 3);
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(smem, ps.index));
    ps = next;
  }

  // Consumer thread ctid (0..255): warp ctid / 32 owns slab slab0 + ctid / 32 (rows 16 w .. 16 w
  // + 15 of the block). acc: as MmaGemm's, rows g and g + 8 of the warp's slab against columns
  // 8j + 2t, 8j + 2t + 1.
  MM_DEVICE static void consume(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4]) {
    const int warp = ctid >> 5, lane = ctid & 31;
    const int chunks = K / 128;
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
    u32 a0[4][4], a1[4][4];
    mbar_wait(full(smem, ps.index), ps.phase);
    fence_proxy_async();
    load_fragments(stage(smem, ps.index), warp, lane, a0);
    for (int chunk = 0; chunk < chunks; chunk += 2) {  // two at a time: the fragment buffers alternate
      step(smem, warp, lane, chunk + 1 < chunks, ps, a0, a1, acc);
      if (chunk + 1 < chunks) step(smem, warp, lane, chunk + 2 < chunks, ps, a1, a0, acc);
    }
  }
};

}  // namespace megamoe
