// Routing on one GPU: counts the rows routed to each expert, lays them out expert by expert,
// and records for each row its token, its slot (t * topk + k) and its route weight, and for each
// slot its row (-1 for none). Block b of G takes slots [b * per, (b + 1) * per), per =
// ceil(slots / G): route_count writes each block's per-expert counts, then route lets every
// block scan them and place its own slots. With one block, route counts for itself
// (counts == nullptr) and route_count is not launched.
// An id of -1 is an empty slot; any other id outside [0, experts) is counted in errors[0] (the
// first such slot in errors[1]) and skipped, so no later kernel indexes with it.
// One thread per expert in the scans (kRouteThreads, interface/kernel_constants.cuh); the grid
// is the runtime's (route_blocks: one block per kRouteSlotsPerBlock slots).
#pragma once
#include "interface/kernel_args.cuh"
#include "moe/block_scan.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

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
MM_DEVICE void route_count(const RouteCountArgs& a) {
  __shared__ int count[kMaxExperts];
  mm_wait_prior_grid();  // a call's first launch: the caller's kernel before it (Device::launch's early_start)
  mm_release_dependents();  // lets route start early
  count_block_slots(a.ids, route_slots(a.tokens * a.topk), a.experts, count, a.errors.words);
  for (int e = threadIdx.x; e < a.experts; e += kRouteThreads) a.counts[blockIdx.x * a.experts + e] = count[e];
}

MM_DEVICE void route(const RouteArgs& a) {
  __shared__ int cursor[kMaxExperts];
  const SlotRange r = route_slots(a.tokens * a.topk);
  mm_wait_prior_grid();  // Device::launch's early_start (with one block, a call's first launch)
  mm_release_dependents();
  // Thread e: expert e's rows in all blocks, and in the blocks before this one.
  const int e = threadIdx.x, experts = a.experts;
  int total = 0, before = 0;
  if (a.counts == nullptr) {  // one block: count here
    count_block_slots(a.ids, r, experts, cursor, a.errors.words);
    total = e < experts ? cursor[e] : 0;
  } else if (e < experts) {
    for (int b = 0; b < (int)gridDim.x; ++b) {
      const int c = a.counts[b * experts + e];
      total += c;
      before += b < (int)blockIdx.x ? c : 0;
    }
  }
  const int tiles1 = (total + a.bm1 - 1) / a.bm1, tiles2 = (total + a.bm2 - 1) / a.bm2;
  int ends[3] = {total, tiles1, tiles2};  // expert e's ends: its rows and tiles, and those before it
  block_inclusive_scan<3>(ends);
  if (e < experts) {
    const int first = ends[0] - total;  // exclusive
    cursor[e] = first + before;
    if (blockIdx.x == 0) {
      a.expert_offsets[e] = first;
      a.tile_offsets1[e] = ends[1] - tiles1;
      a.tile_offsets2[e] = ends[2] - tiles2;
      if (e == experts - 1)
        a.expert_offsets[experts] = ends[0], a.tile_offsets1[experts] = ends[1], a.tile_offsets2[experts] = ends[2];
    }
  }
  __syncthreads();
  for (int i = r.begin + threadIdx.x; i < r.end; i += kRouteThreads) {
    const int id = a.ids[i];
    int row = -1;
    if (id >= 0 && id < experts) {
      row = atomicAdd(&cursor[id], 1);
      a.row_token[row] = i / a.topk;
      a.row_slot[row] = i;
      a.row_weight[row] = a.weights[i];
    }
    a.slot_row[i] = row;
  }
}

}  // namespace megamoe
