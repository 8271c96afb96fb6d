// The first launch of a call over several ranks (docs/ep.md, phases 1 and 2): this rank's
// tokens routed over the group, the counts exchanged, and the layout of the rows this rank will
// receive. Block b of the grid (every block resident: it meets the others at a grid barrier)
// takes tokens [b * per, (b + 1) * per), per = ceil(tokens / gridDim).
//  1. Each block counts its rows per global expert and, per thread over a run of tokens, its
//     tokens per destination rank; bad ids (outside [-1, world * experts)) are counted and
//     skipped, never sent. Block totals go to block_counts; a grid barrier.
//  2. Each block places its tokens: token t's row in each destination's receive buffer (in token
//     order: reproducible), and each slot's rank among this rank's slots to its expert (in block
//     order; within a block the order of the atomic adds, which moves no result: a routed row's
//     outputs depend on its own inputs only).
//  3. Block b sends destinations b, b + gridDim, ...: this rank's rows per local expert of d and
//     its tokens to d, into d's counts of this call's parity, then d's count flag (the call
//     sequence, released at system scope).
//  4. Block 0 waits for every rank's counts of this call, then lays out what this rank receives:
//     expert by expert, source by source within an expert (so the layout follows from the counts
//     alone), capped at rows_capacity (rows past it dropped and counted); the per-(expert,
//     source) segments and their readiness counters (zeroed); the expert and tile offsets.
// Each phase is a function below (route_ep_count, _place, _send_counts, _wait_counts, _layout);
// route_ep calls them in order. The per-thread arrays and the shared words stay route_ep's, in
// the order they had as one function (their layout in memory, and so the SASS, is unchanged).
#pragma once
#include "ep/protocol.cuh"
#include "moe/block_scan.cuh"

namespace megamoe {

// The layout of a call that lays out nothing (an aborted call's): its stages walk no tile.
MM_DEVICE void route_ep_empty_layout(const RouteEpArgs& a) {
  for (int e = threadIdx.x; e <= a.ep.experts; e += kRouteThreads)
    a.expert_offsets[e] = 0, a.tile_offsets1[e] = 0, a.tile_offsets2[e] = 0;
}

// What every phase of route_ep reads: the group's shape, this thread's run of tokens, and
// block_counts with its rows (a block's rows per global expert, then its tokens per rank).
struct RouteEpSpan {
  int W, E, G, K, tid, r0, r1, row_words;
  int* block_counts;
};

// Phase 1: this block's rows per global expert and this thread's tokens per rank (mine, and with
// those before it: before), bad ids counted; the block's totals to block_counts, then a grid barrier.
template <int kRanks>
MM_DEVICE void route_ep_count(const RouteEpArgs& a, const RouteEpSpan& sp, int* count, int (&mine)[kRanks],
                              int (&before)[kRanks]) {
  const EpArgs& ep = a.ep;
  const int W = sp.W, E = sp.E, G = sp.G, K = sp.K, tid = sp.tid, r0 = sp.r0, r1 = sp.r1, row_words = sp.row_words;
  int* block_counts = sp.block_counts;
  for (int g = tid; g < G; g += kRouteThreads) count[g] = 0;
  __syncthreads();
  for (int d = 0; d < kRanks; ++d) mine[d] = 0;
  for (int t = r0; t < r1; ++t) {
    u32 dests = 0;
    for (int k = 0; k < K; ++k) {
      const int i = t * K + k, id = a.ids[i];
      if (id >= 0 && id < G) {
        atomicAdd(&count[id], 1);
        dests |= 1u << (id / E);
      } else if (id != -1) {
        atomicAdd(&ep.errors.words[kErrBadIds], 1);
        atomicMin(&ep.errors.words[kErrFirstBadSlot], i);
      }
    }
    for (int d = 0; d < W; ++d) mine[d] += (dests >> d) & 1;
  }
  for (int d = 0; d < kRanks; ++d) before[d] = mine[d];
  block_inclusive_scan<kRanks>(before);  // this thread's tokens per destination, and those before it
  __syncthreads();
  for (int g = tid; g < G; g += kRouteThreads) block_counts[blockIdx.x * row_words + g] = count[g];
  if (tid == kRouteThreads - 1)
    for (int d = 0; d < W; ++d) block_counts[blockIdx.x * row_words + G + d] = before[d];
  ep_grid_barrier(ep.state + kStateBarrierCount, ep.state + kStateBarrierGeneration);
}

// Phase 2: each token's row per destination (dest_row) and each slot's rank among this rank's
// slots to its expert (slot_rank), from the counts of the blocks before this one.
template <int kRanks>
MM_DEVICE void route_ep_place(const RouteEpArgs& a, const RouteEpSpan& sp, int* count, int* dest_base,
                              const int (&mine)[kRanks], const int (&before)[kRanks], int (&next)[kRanks]) {
  const EpArgs& ep = a.ep;
  const int W = sp.W, E = sp.E, G = sp.G, K = sp.K, tid = sp.tid, r0 = sp.r0, r1 = sp.r1, row_words = sp.row_words;
  int* block_counts = sp.block_counts;
  for (int g = tid; g < G; g += kRouteThreads) {
    int c = 0;
    for (int b = 0; b < int(blockIdx.x); ++b) c += block_counts[b * row_words + g];
    count[g] = c;
  }
  if (tid < W) {
    int c = 0;
    for (int b = 0; b < int(blockIdx.x); ++b) c += block_counts[b * row_words + G + tid];
    dest_base[tid] = c;
  }
  __syncthreads();
  for (int d = 0; d < W; ++d) next[d] = dest_base[d] + before[d] - mine[d];
  for (int t = r0; t < r1; ++t) {
    u32 dests = 0;
    for (int k = 0; k < K; ++k) {
      const int i = t * K + k, id = a.ids[i];
      int rank = -1;
      if (id >= 0 && id < G) {
        rank = atomicAdd(&count[id], 1);
        dests |= 1u << (id / E);
      }
      ep.slot_rank[i] = rank;
    }
    for (int d = 0; d < W; ++d) ep.dest_row[t * W + d] = (dests >> d) & 1 ? next[d]++ : -1;
  }
}

// Phase 3: this rank's rows per local expert of each destination d, and its tokens to d, into
// d's counts of this call's parity, then d's count flag (released at system scope).
MM_DEVICE void route_ep_send_counts(const RouteEpArgs& a, const RouteEpSpan& sp, u32 seq) {
  const EpArgs& ep = a.ep;
  const int W = sp.W, E = sp.E, G = sp.G, tid = sp.tid, row_words = sp.row_words;
  int* block_counts = sp.block_counts;
  for (int d = blockIdx.x; d < W; d += gridDim.x) {
    // A rank of another node: staged here, then put to the same words of its region.
    const u64 at = ep.counts_at + u64(((seq & 1) * W + ep.rank) * (E + 1)) * 4;
    const bool remote = ep_remote(ep, d);
    int* to = remote ? ep_own<int>(ep, ep.stage_counts_at) + d * (E + 1) : ep_at<int>(ep, d, at);
    for (int e = tid; e <= E; e += kRouteThreads) {
      const int g = e < E ? d * E + e : G + d;  // the last word: tokens to d
      int c = 0;
      for (int b = 0; b < int(gridDim.x); ++b) c += block_counts[b * row_words + g];
      to[e] = c;
    }
    mm_fence_system();
    __syncthreads();
    if (remote && tid < MEGAMOE_WARP_SIZE) {
      ep_put_warp(ep, d, at, to, u64(E + 1) * 4);
      ep_quiet(ep);  // landed before the flag
    }
    if (tid == 0) ep_set_flag(ep, d, ep.count_flags_at, (seq & 1) * W + ep.rank, seq);
  }
}

// Phase 4a (block 0): waits for every rank's count flag of this call; false when a wait gave up.
MM_DEVICE bool route_ep_wait_counts(const RouteEpArgs& a, const RouteEpSpan& sp, u32 seq, int& ok) {
  const EpArgs& ep = a.ep;
  const int W = sp.W, tid = sp.tid;
  if (tid == 0) ok = 1;
  __syncthreads();
  if (tid < W && !ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.count_flags_at) + (seq & 1) * W + tid, seq,
                               kEpPhaseCounts, tid))
    ok = 0;
  __syncthreads();
  return ok;
}

// Phase 4b (block 0): what this rank receives, expert by expert and source by source, capped at
// rows_capacity: the expert and tile offsets, the per-(expert, source) segments and their
// readiness counters (zeroed), and the rows past the cap counted as dropped.
MM_DEVICE void route_ep_layout(const RouteEpArgs& a, const RouteEpSpan& sp, u32 seq) {
  const EpArgs& ep = a.ep;
  const int W = sp.W, E = sp.E;
  const int e = sp.tid, cap = a.rows_capacity;
  int total = 0;
  if (e < E)
    for (int s = 0; s < W; ++s) total += ep_counts_from(ep, s, seq)[e];
  int first[1] = {total};
  block_inclusive_scan<1>(first);
  const int start = first[0] - total;  // before any cap
  const int offset = min(start, cap), rows = min(start + total, cap) - offset;
  int ends[3] = {e < E ? (rows + a.bm1 - 1) / a.bm1 : 0, e < E ? (rows + a.bm2 - 1) / a.bm2 : 0, total - rows};
  const int tiles1 = ends[0], tiles2 = ends[1];
  block_inclusive_scan<3>(ends);
  if (e < E) {
    a.expert_offsets[e] = offset;
    a.tile_offsets1[e] = ends[0] - tiles1;
    a.tile_offsets2[e] = ends[1] - tiles2;
    int seg = start;
    for (int s = 0; s < W; ++s) {
      const int c = ep_counts_from(ep, s, seq)[e];
      ep.segment[e * W + s] = seg;
      ep.segment_rows[e * W + s] = max(0, min(seg + c, cap) - seg);
      ep.ready[e * W + s] = 0;
      seg += c;
    }
    if (e == E - 1) {
      a.expert_offsets[E] = offset + rows;
      a.tile_offsets1[E] = ends[0];
      a.tile_offsets2[E] = ends[1];
      if (ends[2] > 0) atomicAdd(&ep.errors.words[kErrDroppedRows], ends[2]);
    }
  }
}

// kRanks: route_ep_ranks(world), at least the group's ranks.
template <int kRanks>
MM_DEVICE void route_ep(const RouteEpArgs& a) {
  const EpArgs& ep = a.ep;
  const int W = ep.world, E = ep.experts, G = W * E, K = ep.topk;
  __shared__ int count[kMaxGlobalExperts];  // per global expert: this block's rows, then its cursor
  __shared__ int dest_base[kRanks];
  __shared__ int ok;  // block 0: every rank's counts have come
  mm_wait_prior_grid();  // a call's first launch: the previous call's kernels have finished
  mm_release_dependents();
  if (ep_aborted(ep)) {  // every block reads the same: nothing else of this rank runs now
    if (blockIdx.x == 0) route_ep_empty_layout(a);
    return;
  }
  const u32 seq = ep_call_seq(ep);
  const int tid = threadIdx.x;
  const int per = (a.tokens + int(gridDim.x) - 1) / int(gridDim.x);
  const int t0 = min(int(blockIdx.x) * per, a.tokens), t1 = min(t0 + per, a.tokens);
  const int run = (t1 - t0 + kRouteThreads - 1) / kRouteThreads;  // tokens a thread takes, in order
  const int r0 = min(t0 + tid * run, t1), r1 = min(r0 + run, t1);
  const RouteEpSpan sp{W, E, G, K, tid, r0, r1, G + W, a.block_counts};
  int mine[kRanks], before[kRanks], next[kRanks];
  route_ep_count(a, sp, count, mine, before);
  route_ep_place(a, sp, count, dest_base, mine, before, next);
  route_ep_send_counts(a, sp, seq);
  if (blockIdx.x != 0) return;
  if (!route_ep_wait_counts(a, sp, seq, ok)) {
    route_ep_empty_layout(a);
    return;
  }
  route_ep_layout(a, sp, seq);
}

}  // namespace megamoe
