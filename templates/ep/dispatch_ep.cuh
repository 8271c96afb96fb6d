// Dispatch over several ranks (docs/ep.md, phase 3), by the first `blocks` blocks of Stage1 or
// by every block of dispatch_ep (the serial path). One warp a token or a received row:
//  - send: token t's metadata (its index; per slot the local expert and rank on the destination,
//    or kNoSlot, and the route weight) and its x in fp8 with e8m0 scales per x_block (or one per
//    row, kXPerRow: the row's maximum taken first) go once to each rank of this node it is
//    routed to, at its row there (route_ep's dest_row); over nodes (the nvshmem transport) once
//    to one rank of each other node it goes to, its gateway there, with relay metadata (every
//    slot that node serves, and the token's row at each of its ranks);
//  - the last dispatch block to finish sending sets this rank's arrive flag on every rank;
//  - forward (over nodes): a gateway copies each such row to the other ranks of its node that the
//    token goes to, writes every one's metadata, and once a source's rows are scanned tells its
//    node (the source's forward flag);
//  - receive: once a source's arrive flag (and from another node, every forward flag) holds this
//    call, its rows are laid out: each slot's routed row p = the (expert, source) segment's first
//    row + the slot's rank, where the row's receive-buffer index, home wire row and route weight
//    are recorded, and on the Hopper path its x is copied into the routed layout
//    (moe/routed_rows.cuh); then the segment's readiness counter is raised (device scope, after
//    a fence), which Stage1's tiles wait for.
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

// Where token t's relay metadata for node n is staged (the nvshmem transport: put from here).
MM_DEVICE u8* ep_relay_out(const EpArgs& ep, int node, int t) {
  return ep_own<u8>(ep, ep.stage_relay_at) + ((i64)node * ep.max_tokens + t) * ep_relay_bytes(ep.topk, ep.node_size);
}
// A source's row as this rank, its gateway, received it.
MM_DEVICE const u8* ep_relay_in(const EpArgs& ep, int source, int row) {
  return ep_own<const u8>(ep, ep.relay_meta_at) + ep_recv_row(ep, source, row) * ep_relay_bytes(ep.topk, ep.node_size);
}

// Token t's relay metadata for each other node it goes to: lane k writes slot k's entry (code and
// weight where that node serves it, and the rank within the node), lane 0 the token and the call,
// lane i the token's row at the node's rank i.
MM_DEVICE void ep_stage_relays(const EpArgs& ep, int t, const int* rows, int k, int id, int rank, float w, int lane,
                               u32 seq) {
  const int N = ep.node_size, E = ep.experts, K = ep.topk;
  for (int n0 = 0; n0 < ep.world; n0 += N) {
    if (n0 == ep.node_first) continue;
    bool to = false;
    for (int i = 0; i < N; ++i) to = to || rows[n0 + i] >= 0;
    if (!to) continue;
    u8* relay = ep_relay_out(ep, n0 / N, t);
    if (k < K) {
      const bool here = id >= 0 && id < ep.world * E && id / E >= n0 && id / E < n0 + N;
      *reinterpret_cast<uint2*>(relay + 16 + 8 * k) =
          here ? make_uint2((u32(id % E) << kSlotRankBits) | u32(rank), __float_as_uint(w)) : make_uint2(kNoSlot, 0u);
      relay[ep_relay_ranks_at(K) + k] = u8(here ? id / E - n0 : kNoNodeRank);
    }
    if (lane == 0) reinterpret_cast<int*>(relay)[0] = t, reinterpret_cast<u32*>(relay)[1] = seq;
    if (lane < N) reinterpret_cast<int*>(relay + ep_relay_rows_at(K))[lane] = rows[n0 + lane];
  }
}

// Token t's row (x and scales staged once, its relay metadata per node) put to its gateway in
// each other node it goes to: one of the node's ranks it is routed to, turn by turn over tokens
// (the gateways share the forwarding). Every lane of the warp.
MM_DEVICE void ep_put_relays(const EpArgs& ep, int t, const int* rows, int scales) {
  const int N = ep.node_size, D = ep.model_dim, relay_bytes = ep_relay_bytes(ep.topk, N);
  for (int n0 = 0; n0 < ep.world; n0 += N) {
    if (n0 == ep.node_first) continue;
    int c = 0;
    for (int i = 0; i < N; ++i) c += rows[n0 + i] >= 0;
    if (c == 0) continue;
    int g = n0;
    for (int i = 0, pick = (t + ep.rank) % c; i < N; ++i)
      if (rows[n0 + i] >= 0 && pick-- == 0) g = n0 + i;
    const i64 row = ep_recv_row(ep, ep.rank, rows[g]);
    ep_put_warp(ep, g, ep.recv_x_at + row * D, ep_own<u8>(ep, ep.stage_x_at) + (i64)t * D, u64(D));
    ep_put_warp(ep, g, ep.recv_scales_at + row * scales, ep_own<u8>(ep, ep.stage_scales_at) + (i64)t * scales,
                u64(scales));
    ep_put_warp(ep, g, ep.relay_meta_at + row * relay_bytes, ep_relay_out(ep, n0 / N, t), u64(relay_bytes));
  }
}

// One warp sends token t.
template <int kXBlock>
MM_DEVICE void ep_send_token(const EpArgs& ep, const EpDispatch& d, int t, int lane, u32 seq) {
  const int W = ep.world, E = ep.experts, K = ep.topk, D = ep.model_dim;
  const int my_row = lane < W ? ep.dest_row[t * W + lane] : -1;
  if (mm_ballot(my_row >= 0) == 0) return;  // every slot empty or bad
  int rows[kMaxWorld];
  bool staged = false;  // going to a rank of another node: x staged once
  for (int r = 0; r < W; ++r) {  // rows past W are never read
    rows[r] = mm_shfl(my_row, r);
    staged = staged || (rows[r] >= 0 && ep_remote(ep, r));
  }
  for (int k0 = 0; k0 < K; k0 += MEGAMOE_WARP_SIZE) {  // lane k: slot k
    const int k = k0 + lane;
    int id = -1, rank = 0;
    float w = 0.f;
    if (k < K) id = d.ids[t * K + k], rank = ep.slot_rank[t * K + k], w = d.weights[t * K + k];
    for (int r = 0; r < W; ++r) {
      if (rows[r] < 0 || ep_remote(ep, r)) continue;
      u8* meta = ep_meta(ep, r, ep.rank, rows[r]);
      if (k == 0) *reinterpret_cast<int*>(meta) = t;
      if (k < K) {
        const bool here = id >= 0 && id < W * E && id / E == r;
        *reinterpret_cast<uint2*>(meta + 16 + 8 * k) =
            here ? make_uint2((u32(id % E) << kSlotRankBits) | u32(rank), __float_as_uint(w)) : make_uint2(kNoSlot, 0u);
      }
    }
    if (staged) ep_stage_relays(ep, t, rows, k, id, rank, w, lane, seq);
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
  if (staged) ep_put_relays(ep, t, rows, scales);
}

// One warp lays out row j of source s (kRouted: also x into the routed layout).
template <int kXBlock, bool kRouted, bool kCheck>
MM_DEVICE void ep_lay_out_row(const EpArgs& ep, const EpDispatch& d, int s, int j, int lane) {
  const int W = ep.world, K = ep.topk, D = ep.model_dim;
  const u8* meta = ep_meta(ep, ep.rank, s, j);
  const int t = *reinterpret_cast<const int*>(meta);
  const i64 row = ep_recv_row(ep, s, j);
  // A source of another node: its gateway here and the row there (a peer's bytes: checked).
  int gateway = -1, gateway_row = 0;
  if (ep_remote(ep, s)) {
    gateway = reinterpret_cast<const int*>(meta)[1], gateway_row = reinterpret_cast<const int*>(meta)[2];
    if (gateway < ep.node_first || gateway >= ep.node_first + ep.node_size || gateway_row < 0 ||
        gateway_row >= ep.max_tokens)
      gateway = -1;
  }
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
        // A token of another node: its output stays in this rank's outbox, summed by its gateway.
        d.row_slot[p] = ep_remote(ep, s) ? ep.world * (ep.max_tokens * K) + p : s * (ep.max_tokens * K) + t * K + k;
        d.row_weight[p] = __uint_as_float(entry.y);
        r16 = (p - d.expert_offsets[e]) & 15;
      }
      if (entry.x != kNoSlot && gateway >= 0) {  // where the gateway finds it (-1: dropped)
        int* at = ep_at<int>(ep, gateway, ep.slot_map_at) + (ep_recv_row(ep, s, gateway_row) * K + k) * 2;
        at[0] = ep.rank, at[1] = p;
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

// A gateway's row j of source s (another node's; its relay metadata says this call): the token's
// metadata written for each rank of this node it goes to (this one included), with this rank and
// row as its gateway, and its x and scales copied to each other one. False: not a gateway row.
template <int kXBlock>
MM_DEVICE bool ep_forward_row(const EpArgs& ep, int s, int j, int lane, u32 seq) {
  const int K = ep.topk, D = ep.model_dim, N = ep.node_size;
  const u8* relay = ep_relay_in(ep, s, j);
  const int t = reinterpret_cast<const int*>(relay)[0];
  if (reinterpret_cast<const u32*>(relay)[1] != seq || t < 0 || t >= ep.max_tokens) return false;
  const int scales = D / ep_x_block<kXBlock>(D);
  const i64 from = ep_recv_row(ep, s, j);
  for (int i = 0; i < N; ++i) {
    const int m = ep.node_first + i, row_m = reinterpret_cast<const int*>(relay + ep_relay_rows_at(K))[i];
    if (row_m < 0 || row_m >= ep.max_tokens || (m == ep.rank && row_m != j)) continue;
    u8* meta = ep_meta(ep, m, s, row_m);
    if (lane == 0) reinterpret_cast<int*>(meta)[0] = t, reinterpret_cast<int*>(meta)[1] = ep.rank,
                   reinterpret_cast<int*>(meta)[2] = j;
    for (int k = lane; k < K; k += MEGAMOE_WARP_SIZE)
      *reinterpret_cast<uint2*>(meta + 16 + 8 * k) = relay[ep_relay_ranks_at(K) + k] == i
                                                         ? *reinterpret_cast<const uint2*>(relay + 16 + 8 * k)
                                                         : make_uint2(kNoSlot, 0u);
    if (m == ep.rank) continue;
    const i64 to = ep_recv_row(ep, s, row_m);
    const u8* x = ep_own<const u8>(ep, ep.recv_x_at) + from * D;
    for (int c = lane * 16; c < D; c += MEGAMOE_WARP_SIZE * 16)
      *reinterpret_cast<uint4*>(ep_at<u8>(ep, m, ep.recv_x_at) + to * D + c) = *reinterpret_cast<const uint4*>(x + c);
    for (int c = lane; c < scales; c += MEGAMOE_WARP_SIZE)
      ep_at<u8>(ep, m, ep.recv_scales_at)[to * scales + c] = ep_own<const u8>(ep, ep.recv_scales_at)[from * scales + c];
  }
  return true;
}

// Over nodes: one warp's share of the rows each source of another node sent here, forwarded where
// this rank is their gateway; the warp that completes a source's scan tells every rank of this
// node (its forward flag of that source), after every warp's stores (each fences before counting).
template <int kXBlock>
MM_DEVICE void ep_forward(const EpArgs& ep, int worker, int workers, int lane, u32 seq) {
  for (int i = 0; i < ep.world; ++i) {
    const int s = (ep.rank + 1 + i) % ep.world;
    if (!ep_remote(ep, s)) continue;
    const int n = min(ep_counts_from(ep, s, seq)[ep.experts], ep.max_tokens);
    if (worker >= max(n, 1)) continue;
    int ok = 1;
    if (n > 0 && lane == 0)
      ok = ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.arrive_flags_at) + s, seq, kEpPhaseRows, s);
    if (!mm_shfl(ok, 0)) return;
    mm_syncwarp();  // the other lanes read what lane 0 acquired
    int scanned = 0;
    for (int j = worker; j < n; j += workers, ++scanned)
      if (ep_forward_row<kXBlock>(ep, s, j, lane, seq) && lane == 0)
        ep.gateway_rows[atomicAdd(ep.state + kStateGateways, 1u)] = int(ep_recv_row(ep, s, j));
    mm_fence_system();  // this lane's stores to the node, before the count
    mm_syncwarp();
    if (lane == 0 && (n == 0 || atomicAdd(&ep.forwarded[s], scanned) + scanned == n)) {
      if (n > 0) atomicExch(&ep.forwarded[s], 0);
      mm_fence_system();
      for (int m = ep.node_first; m < ep.node_first + ep.node_size; ++m)
        ep_set_flag(ep, m, ep.fwd_flags_at, s * ep.world + ep.rank, seq);
    }
  }
}

// Whether source s's rows of this call are all here (one lane waits): its arrive flag, and for a
// source of another node every gateway's forward flag of it. False: timed out or aborted.
MM_DEVICE bool ep_rows_arrived(const EpArgs& ep, int s, u32 seq) {
  if (!ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.arrive_flags_at) + s, seq, kEpPhaseRows, s)) return false;
  if (ep_remote(ep, s))
    for (int m = ep.node_first; m < ep.node_first + ep.node_size; ++m)
      if (!ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.fwd_flags_at) + s * ep.world + m, seq, kEpPhaseRows, m))
        return false;
  return true;
}

// One warp's share of every source's rows, source by source once each has arrived (over nodes,
// its share of the forwarding first).
template <int kXBlock, bool kRouted, bool kCheck>
MM_DEVICE void ep_receive(const EpArgs& ep, const EpDispatch& d, int worker, int workers, int lane, u32 seq) {
  if (ep.remote) ep_forward<kXBlock>(ep, worker, workers, lane, seq);
  for (int i = 0; i < ep.world; ++i) {
    const int s = (ep.rank + 1 + i) % ep.world;
    const int n = min(ep_counts_from(ep, s, seq)[ep.experts], ep.max_tokens);
    if (worker >= n) continue;
    int ok = 1;
    if (lane == 0) ok = ep_rows_arrived(ep, s, seq);
    if (!mm_shfl(ok, 0)) return;
    mm_syncwarp();  // the other lanes read what lane 0 acquired
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
      for (int t = base; t < min(base + d.stride, d.tokens); ++t) ep_send_token<kXBlock>(ep, d, t, lane, seq);
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
