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
#pragma once
#include "ep/protocol.cuh"
#include "moe/block_scan.cuh"

namespace megamoe {

// The layout of a call that lays out nothing (an aborted call's): its stages walk no tile.
MM_DEVICE void route_ep_empty_layout(const RouteEpArgs& a) {
  for (int e = threadIdx.x; e <= a.ep.experts; e += kRouteThreads)
    a.expert_offsets[e] = 0, a.tile_offsets1[e] = 0, a.tile_offsets2[e] = 0;
}

MM_DEVICE void route_ep(const RouteEpArgs& a) {
  const EpArgs& ep = a.ep;
  const int W = ep.world, E = ep.experts, G = W * E, K = ep.topk;
  __shared__ int count[kMaxWorld * kMaxExperts];  // per global expert: this block's rows, then its cursor
  __shared__ int dest_base[kMaxWorld];
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
  int* block_counts = a.block_counts;
  const int row_words = G + W;

  // 1. counts
  for (int g = tid; g < G; g += kRouteThreads) count[g] = 0;
  __syncthreads();
  int mine[kMaxWorld] = {};
  for (int t = r0; t < r1; ++t) {
    u32 dests = 0;
    for (int k = 0; k < K; ++k) {
      const int i = t * K + k, id = a.ids[i];
      if (id >= 0 && id < G) {
        atomicAdd(&count[id], 1);
        dests |= 1u << (id / E);
      } else if (id != -1) {
        atomicAdd(&ep.errors[kErrBadIds], 1);
        atomicMin(&ep.errors[kErrFirstBadSlot], i);
      }
    }
    for (int d = 0; d < W; ++d) mine[d] += (dests >> d) & 1;
  }
  int before[kMaxWorld];
  for (int d = 0; d < kMaxWorld; ++d) before[d] = mine[d];
  block_inclusive_scan<kMaxWorld>(before);  // this thread's tokens per destination, and those before it
  __syncthreads();
  for (int g = tid; g < G; g += kRouteThreads) block_counts[blockIdx.x * row_words + g] = count[g];
  if (tid == kRouteThreads - 1)
    for (int d = 0; d < W; ++d) block_counts[blockIdx.x * row_words + G + d] = before[d];
  ep_grid_barrier(ep.state + kStateBarrierCount, ep.state + kStateBarrierGeneration);

  // 2. placement
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
  int next[kMaxWorld];
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

  // 3. counts to every rank
  for (int d = blockIdx.x; d < W; d += gridDim.x) {
    int* to = ep_at<int>(ep, d, ep.counts_at) + ((seq & 1) * W + ep.rank) * (E + 1);
    for (int e = tid; e <= E; e += kRouteThreads) {
      const int g = e < E ? d * E + e : G + d;  // the last word: tokens to d
      int c = 0;
      for (int b = 0; b < int(gridDim.x); ++b) c += block_counts[b * row_words + g];
      to[e] = c;
    }
    mm_fence_system();
    __syncthreads();
    if (tid == 0)
      mm_store_release_system(ep_at<u32>(ep, d, ep.count_flags_at) + (seq & 1) * W + ep.rank, seq);
  }
  if (blockIdx.x != 0) return;

  // 4. this rank's layout
  __shared__ int ok;
  if (tid == 0) ok = 1;
  __syncthreads();
  if (tid < W && !ep_wait_flag(ep, ep_at<const u32>(ep, ep.rank, ep.count_flags_at) + (seq & 1) * W + tid, seq,
                               kEpPhaseCounts, tid))
    ok = 0;
  __syncthreads();
  if (!ok) {
    route_ep_empty_layout(a);
    return;
  }
  const int e = tid, cap = a.rows_capacity;
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
      if (ends[2] > 0) atomicAdd(&ep.errors[kErrDroppedRows], ends[2]);
    }
  }
}

}  // namespace megamoe
