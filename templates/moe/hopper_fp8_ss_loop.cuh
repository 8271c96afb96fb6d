// The Hopper main loop on fp8-resident weights (docs/layer.md): both wgmma operands read from
// shared memory, the two consumer warpgroups issuing in turn (moe/hopper_pipeline.cuh's Loop).
#pragma once
#include "moe/hopper_pipeline.cuh"
#include "hopper/wgmma.cuh"
#include "hopper/wgmma_ss_e4m3.cuh"

namespace megamoe {

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

// The unit of a chunk is the e4m3 copy prepare_weights makes: the chunk's 128 rows, 16 KB, the
// values the register-converted loop would make. The A descriptor reads it where it lands (at a
// swizzle atom, see HopperPipeline's layout), so the consumers only issue, promote and stash.
// Each issues a whole scale block's chunks and waits once; the two warpgroups issue in turn
// (IssueTurns), so one promotes or stashes while the other's wgmma run.
template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups>
struct HopperFp8SsLoop {
  using Pipe = HopperPipeline<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups, HopperFp8SsLoop>;
  // Two consumer warpgroups take turns (IssueTurns); a stage of 256 rows' 16 KB units would leave
  // too few stages beside the region (the config refuses it).
  static_assert(kGroups == 1, "fp8-resident weights in 128-row blocks");
  static constexpr bool kResident = true;
  static constexpr int kUnitBytes = kFp8ResidentUnitBytes, kWordBytes = kUnitBytes, kExpBytes = 0;
  static constexpr int NT = BM / 8;
  using State = IssueTurns;

  // Bytes of one expert's weights; the unit of a chunk within them.
  MM_DEVICE static i64 expert_bytes(i64 rows, int k) { return fp8_resident_expert_bytes(rows, k); }
  MM_DEVICE static const u8* unit(const u8* units, int group, int chunk, int chunks) {
    return units + ((i64)group * chunks + chunk) * kFp8ResidentUnitBytes;
  }

  // The four wgmma of a stage for consumer warpgroup wg, its 64 weight rows and the tokens both
  // from shared memory.
  template <int PT>
  MM_DEVICE static void issue(const u8* st, int wg, float (&p)[PT][4], bool accumulate) {
    const u64 desc_a = wg_desc_sw128(st + Pipe::kWordsAt + wg * (kWordBytes / 2)), desc_b = wg_desc_sw128(st);
    wg_fence_acc(p);
    wg_fence();
    for (int kb = 0; kb < 4; ++kb) WgmmaE4m3SS<8 * PT>::mma(p, desc_a + 2 * kb, desc_b + 2 * kb, accumulate || kb > 0);
    wg_commit();
    wg_fence_acc(p);
  }

  // The main loop of a tile at width N (see HopperPipeline::consume).
  template <int N>
  MM_DEVICE static void consume_at(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4],
                                   IssueTurns& turns) {
    const int wg = ctid >> 7, lane = ctid & 31;
    const int chunks = K / 128;
    if constexpr (!Pipe::kPromotes) consume_whole<N>(smem, wg, lane, chunks, ps, acc);
    else consume_blocks<N>(smem, wg, lane, chunks, ps, acc, turns);
  }

  // Per scale block, its chunks' wgmma issued back to back in this warpgroup's turn and waited
  // for once, the sums promoted with the scales of the block's last chunk, its stages handed back.
  template <int N>
  MM_DEVICE static void consume_blocks(u8* smem, int wg, int lane, int chunks, Ring<kStages>& ps, float (&acc)[NT][4],
                                       IssueTurns& turns) {
    float p[N / 8][4];
    for (int chunk = 0; chunk < chunks; chunk += kScaleChunks) {
      Ring<kStages> r = ps, last = ps;
      turns.before(wg);
      for (int i = 0; i < kScaleChunks; ++i, r.advance()) {
        mbar_wait(Pipe::full(smem, r.index), r.phase);
        issue(Pipe::stage(smem, r.index), wg, p, i > 0);
        last = r;
      }
      turns.after(wg);
      wg_wait<0>();
      wg_fence_acc(p);
      Pipe::template promote<false>(acc, p, Pipe::stage(smem, last.index), lane & 3, {});
      for (int i = 0; i < kScaleChunks; ++i, ps.advance()) Pipe::release(smem, lane, ps.index);
    }
  }

  // No promotion (kScaleWholeK, kScaleStatic): nothing to hide behind the other warpgroup's
  // wgmma, so both issue as their stages land, no turns. Every chunk's wgmma add into the
  // accumulators, two chunks at a time, waited for at the end of each pair (a group in flight
  // across the loop's back edge makes ptxas serialise them: C7515), the stages handed back as
  // their wgmma are done. With kScaleWholeK the sums are scaled by the rows' scales of the last
  // chunk.
  template <int N>
  MM_DEVICE static void consume_whole(u8* smem, int wg, int lane, int chunks, Ring<kStages>& ps, float (&acc)[NT][4]) {
    float(&sums)[N / 8][4] = *reinterpret_cast<float(*)[N / 8][4]>(&acc);
    Ring<kStages> last = ps;
    for (int chunk = 0; chunk < chunks; chunk += 2) {
      const Ring<kStages> first = ps;
      const bool pair = chunk + 1 < chunks;
      mbar_wait(Pipe::full(smem, ps.index), ps.phase);
      issue(Pipe::stage(smem, ps.index), wg, sums, chunk > 0);
      last = ps;
      ps.advance();
      if (pair) {
        mbar_wait(Pipe::full(smem, ps.index), ps.phase);
        issue(Pipe::stage(smem, ps.index), wg, sums, true);
        last = ps;
        ps.advance();
        wg_wait<1>();
        Pipe::release(smem, lane, first.index);
      }
      wg_wait<0>();
      if (chunk + 2 < chunks) Pipe::release(smem, lane, last.index);
    }
    wg_fence_acc(sums);
    if constexpr (kScaleChunks == kScaleWholeK) Pipe::template scale_columns<N / 8>(acc, Pipe::stage(smem, last.index), lane & 3);
    Pipe::release(smem, lane, last.index);
  }
};

}  // namespace megamoe
