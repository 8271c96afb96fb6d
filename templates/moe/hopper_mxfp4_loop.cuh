// The Hopper main loop on MXFP4 weights (layout v3): each chunk's weights turned into e4m3
// fragments in registers while the previous chunk's wgmma run (moe/hopper_pipeline.cuh's Loop).
#pragma once
#include "common/e2m1_to_e4m3.cuh"
#include "moe/hopper_pipeline.cuh"
#include "hopper/wgmma.cuh"

namespace megamoe {

// The unit of a chunk is layout v3's: the block's weight words and exponents (8 KB and 512 B). The
// consumers read the next chunk's words while the wgmma of one chunk run and turn them into e4m3
// fragments in registers (two byte permutes per 8 values, block exponent folded in), the A
// operand of register-sourced wgmma.
template <int BM, int kStages, int kBlocksPerSM, int kScaleChunks, int kGroups>
struct HopperMxfp4Loop {
  using Pipe = HopperPipeline<BM, kStages, kBlocksPerSM, kScaleChunks, kGroups, HopperMxfp4Loop>;
  static constexpr bool kResident = false;
  static constexpr int kUnitBytes = kLayoutV3UnitBytes, kWordBytes = kSlabGroup * kSlabWordBytes,
                       kExpBytes = kSlabGroup * kSlabExpBytes;
  static constexpr int NT = BM / 8;
  // Small tiles at one block per SM also keep two chunks' wgmma in flight, where the registers
  // hold a second set of partial sums: the older chunk is promoted while the newer one runs
  // (consume_pairs).
  static constexpr bool kTwoInFlight = kBlocksPerSM == 1 && BM <= 80 && kScaleChunks == 1;

  // Nothing carries over between tiles.
  struct State {
    MM_DEVICE void finish(int) {}
  };

  // Bytes of one expert's weights; the unit of a chunk within them.
  MM_DEVICE static i64 expert_bytes(i64 rows, int k) { return layout_v3_expert_bytes(rows, k); }
  MM_DEVICE static const u8* unit(const u8* units, int group, int chunk, int chunks) {
    return layout_v3_unit(units, group, chunk, chunks);
  }

  // The e4m3 fragments of the warp's slab (warp % 8 of its group's unit) for the four 32-k steps
  // of a stage.
  MM_DEVICE static void load_fragments(const u8* st, int warp, int lane, u32 (&a)[4][4]) {
    const int g = lane >> 2, slab = warp & 7;
    const u8* unit = st + Pipe::unit_at(warp);
    const uint4* wq = reinterpret_cast<const uint4*>(unit + slab * kSlabWordBytes + lane * 32);
    const uint4 w_lo = wq[0], w_hi = wq[1];
    const u32* eq = reinterpret_cast<const u32*>(unit + kWordBytes + slab * kSlabExpBytes);
    const u32 e_lo = eq[g], e_hi = eq[g + 8];
    const u32 lo[4] = {w_lo.x, w_lo.y, w_lo.z, w_lo.w}, hi[4] = {w_hi.x, w_hi.y, w_hi.z, w_hi.w};
    for (int kb = 0; kb < 4; ++kb) {
      mm_e2m1x8_to_e4m3(lo[kb], mm_signed_byte(e_lo, kb), a[kb][0], a[kb][2]);
      mm_e2m1x8_to_e4m3(hi[kb], mm_signed_byte(e_hi, kb), a[kb][1], a[kb][3]);
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

  // Waits for stage r's copies and converts its fragments.
  MM_DEVICE static void fetch(u8* smem, const Ring<kStages>& r, int warp, int lane, u32 (&a)[4][4]) {
    mbar_wait(Pipe::full(smem, r.index), r.phase);
    load_fragments(Pipe::stage(smem, r.index), warp, lane, a);
  }

  // Once the wgmma writing p are waited for: p promoted into acc (the scales from st, stage s),
  // the stage handed back.
  // kFirst: first holds the first pair of scales (see promote); otherwise promote loads them all.
  template <bool kFirst = false, int PT>
  MM_DEVICE static void retire(u8* smem, int lane, const u8* st, int s, float (&p)[PT][4], float (&acc)[NT][4],
                               float4 first = {}) {
    wg_fence_acc(p);
    Pipe::template promote<kFirst>(acc, p, st, lane & 3, first);
    Pipe::release(smem, lane, s);
  }

  // One chunk in flight: the next chunk's fragments are converted while its wgmma run.
  template <int N>
  MM_DEVICE static void step(u8* smem, int warp, int lane, bool has_next, Ring<kStages>& ps, const u32 (&a)[4][4],
                             u32 (&a_next)[4][4], float (&acc)[NT][4]) {
    u8* st = Pipe::stage(smem, ps.index);
    float p[N / 8][4];
    issue(st, a, p);
    Ring<kStages> next = ps;
    next.advance();
    const float4 first = Pipe::scale_pair(st, lane & 3, 0);  // before the conversion: under it
    if (has_next) fetch(smem, next, warp, lane, a_next);
    wg_wait<0>();
    retire<true>(smem, lane, st, ps.index, p, acc, first);
    ps = next;
  }

  // The main loop of a tile at width N (see HopperPipeline::consume).
  template <int N>
  MM_DEVICE static void consume_at(u8* smem, int ctid, int K, Ring<kStages>& ps, float (&acc)[NT][4], State&) {
    const int warp = ctid >> 5, lane = ctid & 31;
    const int chunks = K / 128;
    u32 a0[4][4], a1[4][4];
    fetch(smem, ps, warp, lane, a0);
    if constexpr (!Pipe::kPromotes) {
      consume_whole<N>(smem, warp, lane, chunks, ps, a0, a1, acc);
    } else if constexpr (kScaleChunks > 1) {
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

  // No promotion (kScaleWholeK, kScaleStatic): every chunk's wgmma add into the accumulators
  // themselves. Each chunk's start before the previous chunk's are waited for; once they are, the
  // previous chunk's fragments and stage are free, and the next chunk is converted into those
  // fragments under the wgmma. Every pair of chunks ends with its wgmma waited for: with a group
  // in flight across the loop's back edge ptxas serialises them (C7512). With kScaleWholeK the
  // sums are scaled by the rows' scales of the last chunk's stage. a0 holds the first chunk's
  // fragments on entry.
  template <int N>
  MM_DEVICE static void consume_whole(u8* smem, int warp, int lane, int chunks, Ring<kStages>& ps, u32 (&a0)[4][4],
                                      u32 (&a1)[4][4], float (&acc)[NT][4]) {
    float(&sums)[N / 8][4] = *reinterpret_cast<float(*)[N / 8][4]>(&acc);
    Ring<kStages> prev = ps;
    auto chunk_step = [&](int chunk, u32 (&a)[4][4], u32 (&a_next)[4][4]) {
      issue(Pipe::stage(smem, ps.index), a, sums, chunk > 0);
      wg_wait<1>();
      if (chunk > 0) Pipe::release(smem, lane, prev.index);
      Ring<kStages> next = ps;
      next.advance();
      if (chunk + 1 < chunks) fetch(smem, next, warp, lane, a_next);
      prev = ps;
      ps = next;
    };
    int chunk = 0;
    for (; chunk + 1 < chunks; chunk += 2) {  // two at a time: the fragment buffers alternate
      chunk_step(chunk, a0, a1);
      chunk_step(chunk + 1, a1, a0);
      wg_wait<0>();
    }
    if (chunk < chunks) chunk_step(chunk, a0, a1);  // the last of an odd count
    wg_wait<0>();
    wg_fence_acc(sums);
    if constexpr (kScaleChunks == kScaleWholeK) Pipe::template scale_columns<N / 8>(acc, Pipe::stage(smem, prev.index), lane & 3);
    Pipe::release(smem, lane, prev.index);
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
      const bool block_start = chunk % kScaleChunks == 0, block_end = Pipe::has_scales(chunk, chunks);
      u8* st = Pipe::stage(smem, ps.index);
      issue(st, a, p, !block_start);
      wg_wait<1>();  // the previous chunk's wgmma are done: its fragments and stage are free
      if (!block_start) Pipe::release(smem, lane, prev.index);
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
      u8* st0 = Pipe::stage(smem, ps.index);
      u8* st1 = Pipe::stage(smem, second.index);
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
};

}  // namespace megamoe
