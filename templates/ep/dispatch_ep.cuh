// Dispatch over several ranks (docs/ep.md, phase 3), by the first `blocks` blocks of Stage1 or
// by every block of dispatch_ep (the serial path). One warp a token or a received row:
//  - send: token t's metadata (its index; per slot the local expert and rank on the destination,
//    or kNoSlot, and the route weight) and its x in fp8 with e8m0 scales per x_block (or one per
//    row, kXPerRow: the row's maximum taken first) go once to
//    each rank it is routed to, at its row there (route_ep's dest_row);
//  - the last dispatch block to finish sending sets this rank's arrive flag on every rank;
//  - receive: once a source's arrive flag holds this call, its rows are laid out: each slot's
//    routed row p = the (expert, source) segment's first row + the slot's rank, where the row's
//    receive-buffer index, home wire row and route weight are recorded, and on the Hopper path
//    its x is copied into the routed layout (moe/routed_rows.cuh); then the segment's readiness
//    counter is raised (device scope, after a fence), which Stage1's tiles wait for.
#pragma once
#include "common/numerics.cuh"
#include "ep/protocol.cuh"
#include "moe/routed_rows.cuh"

namespace megamoe {

enum : int { kEpValuesPerStep = MEGAMOE_WARP_SIZE * 16 };  // x values a warp moves per step

// Values per e8m0 scale of x on the wire.
template <int kXBlock>
MM_DEVICE int ep_x_block(int D) { return kXBlock == kXPerRow ? D : kXBlock; }

// Receive-buffer row `row` of source `source`: its index over all sources, and its metadata in
// rank r's region.
MM_DEVICE i64 ep_recv_row(const EpArgs& ep, int source, int row) { return (i64)source * ep.max_tokens + row; }
MM_DEVICE u8* ep_meta(const EpArgs& ep, int r, int source, int row) {
  return ep_at<u8>(ep, r, ep.recv_meta_at) + ep_recv_row(ep, source, row) * ep_meta_bytes(ep.topk);
}

// Where token t's metadata for rank r is written: r's receive buffer, or for a rank of another
// node this rank's staging (put from there, ep_put_token).
MM_DEVICE u8* ep_meta_out(const EpArgs& ep, int r, int t_row) {
  if (ep_remote(ep, r))
    return ep_own<u8>(ep, ep.stage_meta_at) + ((i64)r * ep.max_tokens + t_row) * ep_meta_bytes(ep.topk);
  return ep_meta(ep, r, ep.rank, t_row);
}

// The nvshmem transport: token t's row (x and scales staged once, the metadata per rank) put to
// each rank of another node it goes to, at its row there; every lane of the warp.
MM_DEVICE void ep_put_token(const EpArgs& ep, int t, const int* rows, int scales) {
  const int D = ep.model_dim, meta_bytes = ep_meta_bytes(ep.topk);
  for (int r = 0; r < ep.world; ++r) {
    if (rows[r] < 0 || !ep_remote(ep, r)) continue;
    const i64 row = ep_recv_row(ep, ep.rank, rows[r]);
    ep_put_warp(ep, r, ep.recv_x_at + row * D, ep_own<u8>(ep, ep.stage_x_at) + (i64)t * D, u64(D));
    ep_put_warp(ep, r, ep.recv_scales_at + row * scales, ep_own<u8>(ep, ep.stage_scales_at) + (i64)t * scales,
                u64(scales));
    ep_put_warp(ep, r, ep.recv_meta_at + row * meta_bytes, ep_meta_out(ep, r, rows[r]), u64(meta_bytes));
  }
}

// One warp sends token t.
template <int kXBlock>
MM_DEVICE void ep_send_token(const EpArgs& ep, const EpDispatch& d, int t, int lane) {
  const int W = ep.world, E = ep.experts, K = ep.topk, D = ep.model_dim;
  const int my_row = lane < W ? ep.dest_row[t * W + lane] : -1;
  if (mm_ballot(my_row >= 0) == 0) return;  // every slot empty or bad
  int rows[kMaxWorld];
  bool staged = false;  // going to a rank of another node: x staged once
  for (int r = 0; r < kMaxWorld; ++r) {
    rows[r] = r < W ? mm_shfl(my_row, r) : -1;
    staged = staged || (rows[r] >= 0 && ep_remote(ep, r));
  }
  for (int k0 = 0; k0 < K; k0 += MEGAMOE_WARP_SIZE) {  // lane k: slot k
    const int k = k0 + lane;
    int id = -1, rank = 0;
    float w = 0.f;
    if (k < K) id = d.ids[t * K + k], rank = ep.slot_rank[t * K + k], w = d.weights[t * K + k];
    for (int r = 0; r < W; ++r) {
      if (rows[r] < 0) continue;
      u8* meta = ep_meta_out(ep, r, rows[r]);
      if (k == 0) *reinterpret_cast<int*>(meta) = t;
      if (k < K) {
        const bool here = id >= 0 && id < W * E && id / E == r;
        *reinterpret_cast<uint2*>(meta + 16 + 8 * k) =
            here ? make_uint2((u32(id % E) << kSlotRankBits) | u32(rank), __float_as_uint(w)) : make_uint2(kNoSlot, 0u);
      }
    }
  }
  const int x_block = ep_x_block<kXBlock>(D), scales = D / x_block;
  int row_exponent = 0;
  const u16* x = d.x + (i64)t * d.x_dim;  // x_dim wide; the wire's columns past it (the path's padding) are zero
  if constexpr (kXBlock == kXPerRow) row_exponent = mm_fp8_block_exponent(row_absmax_bf16(x, d.x_dim));
  for (int c0 = 0; c0 < D; c0 += kEpValuesPerStep) {
    const int c = c0 + lane * 16;
    const bool live = c < D;  // D is a multiple of kXBlock: a block's lanes are live together
    float v[16] = {};
    if (live && c < d.x_dim) load_bf16x16(x + c, v);
    RoutedPiece q;
    if constexpr (kXBlock == kXPerRow) q = quantize_piece_with(v, row_exponent);
    else q = quantize_piece<kXBlock / 16>(v);
    if (!live) continue;
    for (int r = 0; r < W; ++r) {
      if (rows[r] < 0 || ep_remote(ep, r)) continue;
      const i64 row = ep_recv_row(ep, ep.rank, rows[r]);
      *reinterpret_cast<uint4*>(ep_at<u8>(ep, r, ep.recv_x_at) + row * D + c) = q.bytes;
      if (c % x_block == 0) ep_at<u8>(ep, r, ep.recv_scales_at)[row * scales + c / x_block] = u8(q.exponent + 127);
    }
    if (staged) {
      *reinterpret_cast<uint4*>(ep_own<u8>(ep, ep.stage_x_at) + (i64)t * D + c) = q.bytes;
      if (c % x_block == 0) ep_own<u8>(ep, ep.stage_scales_at)[(i64)t * scales + c / x_block] = u8(q.exponent + 127);
    }
  }
  if (staged) ep_put_token(ep, t, rows, scales);
}

// One warp lays out row j of source s (kRouted: also x into the routed layout).
template <int kXBlock, bool kRouted, bool kCheck>
MM_DEVICE void ep_lay_out_row(const EpArgs& ep, const EpDispatch& d, int s, int j, int lane) {
  const int W = ep.world, K = ep.topk, D = ep.model_dim;
  const u8* meta = ep_meta(ep, ep.rank, s, j);
  const int t = *reinterpret_cast<const int*>(meta);
  const i64 row = ep_recv_row(ep, s, j);
  for (int k0 = 0; k0 < K; k0 += MEGAMOE_WARP_SIZE) {
    const int k = k0 + lane;
    int p = -1, r16 = 0, e = 0;
    if (k < K && t >= 0 && t < ep.max_tokens) {  // a peer's bytes: checked before they index anything
      const uint2 entry = *reinterpret_cast<const uint2*>(meta + 16 + 8 * k);
      e = int(entry.x >> kSlotRankBits);
      const int rank = int(entry.x & ((1u << kSlotRankBits) - 1));
      if (entry.x != kNoSlot && e < ep.experts && rank < ep.segment_rows[e * W + s]) {
        p = ep.segment[e * W + s] + rank;
        if (kCheck && p >= d.rows_capacity) {
          atomicAdd(&ep.errors.words[kErrBoundsViolations], 1);
          p = -1;
        }
      }
      if (p >= 0) {
        d.row_token[p] = int(row);
        const int home_code = s * (ep.max_tokens * K) + t * K + k;
        const bool outbox = ep_remote(ep, s);  // its output goes home by a put from the outbox (send_rows_ep)
        if (outbox) ep.outbox_home[p] = home_code;
        d.row_slot[p] = outbox ? ep.world * (ep.max_tokens * K) + p : home_code;
        d.row_weight[p] = __uint_as_float(entry.y);
        r16 = (p - d.expert_offsets[e]) & 15;
      }
    }
    if (kRouted) {
      const u64 slots = mm_ballot(p >= 0);
      const int x_block = ep_x_block<kXBlock>(D), scales = D / x_block;
      for (int c0 = 0; c0 < D && slots; c0 += kEpValuesPerStep) {
        const int c = c0 + lane * 16;
        const bool live = c < D;
        RoutedPiece q{make_uint4(0, 0, 0, 0), 0.f, 0};
        if (live) {
          q.bytes = *reinterpret_cast<const uint4*>(ep_at<const u8>(ep, ep.rank, ep.recv_x_at) + row * D + c);
          q.scale = mm_e8m0_to_f32(ep_at<const u8>(ep, ep.rank, ep.recv_scales_at)[row * scales + c / x_block]);
        }
        for (u64 left = slots; left; left &= left - 1) {
          const int at = __ffsll((long long)left) - 1;
          const int pa = mm_shfl(p, at), ra = mm_shfl(r16, at);
          if (live) store_routed_piece(q, lane & 7, c / 128, pa, ra, d.rows_pad, d.xr, d.xs);
        }
      }
    }
    mm_fence_device();  // this lane's stores, before any lane's count
    mm_syncwarp();
    if (p >= 0) atomicAdd(&ep.ready[e * W + s], 1);
  }
}

// One warp's share of every source's rows, source by source once each has arrived.
template <int kXBlock, bool kRouted, bool kCheck>
MM_DEVICE void ep_receive(const EpArgs& ep, const EpDispatch& d, int worker, int workers, int lane, u32 seq) {
  for (int i = 0; i < ep.world; ++i) {
    const int s = (ep.rank + 1 + i) % ep.world;
    const int n = min(ep_counts_from(ep, s, seq)[ep.experts], ep.max_tokens);
    if (worker >= n) continue;
    int ok = 1;
    if (lane == 0) ok = ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.arrive_flags_at) + s, seq, kEpPhaseRows, s);
    if (!mm_shfl(ok, 0)) return;
    for (int j = worker; j < n; j += workers) ep_lay_out_row<kXBlock, kRouted, kCheck>(ep, d, s, j, lane);
  }
}

// A dispatching block's work (blocks 0 .. d.blocks - 1; every thread of the block).
template <int kXBlock, bool kRouted, bool kCheck>
MM_DEVICE void ep_dispatch_block(const EpArgs& ep, const EpDispatch& d, u32 seq) {
  const int warps = int(blockDim.x) / MEGAMOE_WARP_SIZE, lane = threadIdx.x % MEGAMOE_WARP_SIZE;
  const int worker = int(blockIdx.x) * warps + int(threadIdx.x) / MEGAMOE_WARP_SIZE, workers = d.blocks * warps;
  if (!ep_aborted(ep))
    for (int base = worker * d.stride; base < d.tokens; base += workers * d.stride)
      for (int t = base; t < min(base + d.stride, d.tokens); ++t) ep_send_token<kXBlock>(ep, d, t, lane);
  ep_quiet(ep);  // this warp's puts landed before the last block's flag
  if (ep_last_block(ep.state + kStateDispatchDone, u32(d.blocks)) && !ep_aborted(ep))
    ep_signal_all(ep, ep.arrive_flags_at, seq);
  ep_receive<kXBlock, kRouted, kCheck>(ep, d, worker, workers, lane, seq);
}

// The serial path's dispatch launch: every block dispatches; the launch ends once every row this
// rank receives is laid out.
template <int kXBlock, bool kRouted, bool kCheck>
MM_DEVICE void dispatch_ep(const DispatchEpArgs& a) {
  mm_wait_prior_grid();
  mm_release_dependents();
  ep_dispatch_block<kXBlock, kRouted, kCheck>(a.ep, a.dispatch, ep_call_seq(a.ep));
}

}  // namespace megamoe
