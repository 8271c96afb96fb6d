// Routing on one GPU: counts the rows routed to each expert, lays them out expert by expert,
// and records for each row its token, its slot (t * topk + k) and its route weight, and for each
// slot its row (-1 for none). Block b of G takes slots [b * per, (b + 1) * per), per =
// ceil(slots / G): route_count writes each block's per-expert counts, then route lets every
// block scan them and place its own slots. With one block, route counts for itself
// (counts == nullptr) and route_count is not launched.
// An id of -1 is an empty slot; any other id outside [0, experts) is counted in errors[0] (the
// first such slot in errors[1]) and skipped, so no later kernel indexes with it.
#pragma once
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// One thread per expert in route's scans. The grid is the runtime's (src/codegen/kernel_catalog.hpp,
// route_blocks: one block per 2048 slots, at most 256).
enum : int { kRouteThreads = 1024, kMaxExperts = 1024 };

// Error words shared by the MoE kernels (the runtime reads and clears them).
enum : int { kErrBadIds = 0, kErrFirstBadSlot = 1, kErrBoundsViolations = 2, kErrWords = 4 };

struct SlotRange {
  int begin, end;
};

MM_DEVICE SlotRange route_slots(int slots) {
  const int per = (slots + gridDim.x - 1) / gridDim.x, begin = blockIdx.x * per;
  return {begin < slots ? begin : slots, begin + per < slots ? begin + per : slots};
}

// This block's rows per expert into count[] (shared, experts entries); bad ids into errors.
MM_DEVICE void count_block_slots(const int* ids, SlotRange r, int experts, int* count, int* errors) {
  for (int e = threadIdx.x; e < experts; e += kRouteThreads) count[e] = 0;
  __syncthreads();
  for (int i = r.begin + threadIdx.x; i < r.end; i += kRouteThreads) {
    const int id = ids[i];
    if (id >= 0 && id < experts) {
      atomicAdd(&count[id], 1);
    } else if (id != -1) {
      atomicAdd(&errors[kErrBadIds], 1);
      atomicMin(&errors[kErrFirstBadSlot], i);
    }
  }
  __syncthreads();
}

// counts[b * experts + e]: block b's rows routed to expert e.
MM_DEVICE void route_count(const int* ids, int tokens, int topk, int experts, int* counts, int* errors) {
  __shared__ int count[kMaxExperts];
  mm_wait_prior_grid();  // a call's first launch: the caller's kernel before it (Device::launch's early_start)
  mm_release_dependents();  // lets route start early
  count_block_slots(ids, route_slots(tokens * topk), experts, count, errors);
  for (int e = threadIdx.x; e < experts; e += kRouteThreads) counts[blockIdx.x * experts + e] = count[e];
}

// Inclusive prefix sums, in thread order over the block, of each thread's three values: a scan
// within each warp, then one over the warps' totals (two barriers, where a scan of shared memory
// takes two per step).
MM_DEVICE void block_inclusive_scan3(int (&v)[3]) {
  constexpr int kWidth = MEGAMOE_WARP_SIZE, kWarps = kRouteThreads / kWidth;
  static_assert(kWarps <= kWidth, "one warp scans the warps' totals");
  __shared__ int totals[3][kWarps];
  const int lane = threadIdx.x % kWidth, warp = threadIdx.x / kWidth;
  for (int d = 1; d < kWidth; d *= 2)
    for (int i = 0; i < 3; ++i) {
      const int o = mm_shfl_up(v[i], d);
      if (lane >= d) v[i] += o;
    }
  if (lane == kWidth - 1)
    for (int i = 0; i < 3; ++i) totals[i][warp] = v[i];
  __syncthreads();
  if (warp == 0)
    for (int i = 0; i < 3; ++i) {
      int t = lane < kWarps ? totals[i][lane] : 0;
      for (int d = 1; d < kWarps; d *= 2) {
        const int o = mm_shfl_up(t, d);
        if (lane >= d) t += o;
      }
      if (lane < kWarps) totals[i][lane] = t;
    }
  __syncthreads();
  if (warp > 0)
    for (int i = 0; i < 3; ++i) v[i] += totals[i][warp - 1];
}

MM_DEVICE void route(const int* ids, const float* weights, int tokens, int topk, int experts, int bm1, int bm2,
                     const int* counts, int* expert_offsets, int* tile_offsets1, int* tile_offsets2, int* row_token,
                     int* row_slot, float* row_weight, int* slot_row, int* errors) {
  __shared__ int cursor[kMaxExperts];
  const SlotRange r = route_slots(tokens * topk);
  mm_wait_prior_grid();  // Device::launch's early_start (with one block, a call's first launch)
  mm_release_dependents();
  // Thread e: expert e's rows in all blocks, and in the blocks before this one.
  const int e = threadIdx.x;
  int total = 0, before = 0;
  if (counts == nullptr) {  // one block: count here
    count_block_slots(ids, r, experts, cursor, errors);
    total = e < experts ? cursor[e] : 0;
  } else if (e < experts) {
    for (int b = 0; b < (int)gridDim.x; ++b) {
      const int c = counts[b * experts + e];
      total += c;
      before += b < (int)blockIdx.x ? c : 0;
    }
  }
  const int tiles1 = (total + bm1 - 1) / bm1, tiles2 = (total + bm2 - 1) / bm2;
  int ends[3] = {total, tiles1, tiles2};  // expert e's ends: its rows and tiles, and those before it
  block_inclusive_scan3(ends);
  if (e < experts) {
    const int first = ends[0] - total;  // exclusive
    cursor[e] = first + before;
    if (blockIdx.x == 0) {
      expert_offsets[e] = first;
      tile_offsets1[e] = ends[1] - tiles1;
      tile_offsets2[e] = ends[2] - tiles2;
      if (e == experts - 1)
        expert_offsets[experts] = ends[0], tile_offsets1[experts] = ends[1], tile_offsets2[experts] = ends[2];
    }
  }
  __syncthreads();
  for (int i = r.begin + threadIdx.x; i < r.end; i += kRouteThreads) {
    const int id = ids[i];
    int row = -1;
    if (id >= 0 && id < experts) {
      row = atomicAdd(&cursor[id], 1);
      row_token[row] = i / topk;
      row_slot[row] = i;
      row_weight[row] = weights[i];
    }
    slot_row[i] = row;
  }
}

// Which expert owns global row tile `tile`: the last e with tile_offsets[e] <= tile.
MM_DEVICE int expert_of_tile(const int* tile_offsets, int experts, int tile) {
  int lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Tile `tile` of a persistent walk over (row tile, column tile) pairs: its expert, the span
// [p0, p_end) of routed rows it may cover (p0 .. p0 + bm - 1, those below p_end), its column tile.
struct RoutedTile {
  int expert, p0, p_end, col_tile;
};

MM_DEVICE RoutedTile routed_tile(int tile, int col_tiles, int bm, const int* tile_offsets, const int* expert_offsets,
                                 int experts) {
  const int row_tile = tile / col_tiles;
  RoutedTile r;
  r.col_tile = tile % col_tiles;
  r.expert = expert_of_tile(tile_offsets, experts, row_tile);
  r.p0 = expert_offsets[r.expert] + (row_tile - tile_offsets[r.expert]) * bm;
  r.p_end = expert_offsets[r.expert + 1];
  return r;
}

// Stage1's tile rows: each row's token (a_rows) and output row (out_rows), -1 where none. The
// checked build refuses, and counts, rows whose indices would leave their buffers.
// Thread tid of kThreads; errors may be null (a second role computing the same rows), and a_rows
// too (the Hopper kernels, whose activations come routed).
template <int BM, int kThreads, bool kCheck>
MM_DEVICE void stage1_tile_rows(const RoutedTile& rt, const int* row_token, int rows_capacity, int tokens, int* errors,
                                int* a_rows, int* out_rows, int tid) {
  for (int n = tid; n < BM; n += kThreads) {
    const int p = rt.p0 + n;
    int token = p < rt.p_end ? row_token[p] : -1;
    if (kCheck && p < rt.p_end && (p >= rows_capacity || token < 0 || token >= tokens)) {
      if (errors) atomicAdd(&errors[kErrBoundsViolations], 1);
      token = -1;
    }
    if (a_rows) a_rows[n] = token;
    out_rows[n] = token >= 0 ? p : -1;
  }
}

// Stage2's tile rows: each row's routed row (a_rows, or null), slot on the wire and route weight.
template <int BM, int kThreads, bool kCheck>
MM_DEVICE void stage2_tile_rows(const RoutedTile& rt, const int* row_slot, const float* row_weight, int rows_capacity,
                                int slots, int* errors, int* a_rows, int* out_slot, float* weight, int tid) {
  for (int n = tid; n < BM; n += kThreads) {
    const int p = rt.p0 + n;
    int slot = p < rt.p_end ? row_slot[p] : -1;
    if (kCheck && p < rt.p_end && (p >= rows_capacity || slot < 0 || slot >= slots)) {
      if (errors) atomicAdd(&errors[kErrBoundsViolations], 1);
      slot = -1;
    }
    if (a_rows) a_rows[n] = slot >= 0 ? p : -1;
    out_slot[n] = slot;
    weight[n] = slot >= 0 ? row_weight[p] : 0.f;
  }
}

}  // namespace megamoe
