// Prefix sums over the threads of a block of kRouteThreads threads, N values per thread at once:
// a scan within each warp, then one over the warps' totals (two barriers in all).
#pragma once
#include "interface/kernel_constants.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// Inclusive prefix sums, in thread order over the block, of each thread's N values.
template <int N>
MM_DEVICE void block_inclusive_scan(int (&v)[N]) {
  constexpr int kWidth = MEGAMOE_WARP_SIZE, kWarps = kRouteThreads / kWidth;
  static_assert(kWarps <= kWidth, "one warp scans the warps' totals");
  __shared__ int totals[N][kWarps];
  const int lane = threadIdx.x % kWidth, warp = threadIdx.x / kWidth;
  for (int d = 1; d < kWidth; d *= 2)
    for (int i = 0; i < N; ++i) {
      const int o = mm_shfl_up(v[i], d);
      if (lane >= d) v[i] += o;
    }
  if (lane == kWidth - 1)
    for (int i = 0; i < N; ++i) totals[i][warp] = v[i];
  __syncthreads();
  if (warp == 0)
    for (int i = 0; i < N; ++i) {
      int t = lane < kWarps ? totals[i][lane] : 0;
      for (int d = 1; d < kWarps; d *= 2) {
        const int o = mm_shfl_up(t, d);
        if (lane >= d) t += o;
      }
      if (lane < kWarps) totals[i][lane] = t;
    }
  __syncthreads();
  if (warp > 0)
    for (int i = 0; i < N; ++i) v[i] += totals[i][warp - 1];
}

}  // namespace megamoe
