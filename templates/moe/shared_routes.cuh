// A call's routes widened by the model's shared experts (src/config/shared_slots.hpp): each token's
// topk ids become kernel slots (a caller's rank-local expert moves past the rank's shared slots),
// and shared more slots follow them, the token's home rank's shared experts with weight
// shared_weight. A bad id becomes kBadRouteId at its own slot, which route counts (the runtime
// maps the first bad slot back to the caller's t * topk + k). One thread per widened slot,
// grid-stride; the call's first launch.
#pragma once
#include "interface/kernel_args.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

MM_DEVICE void shared_routes(const SharedRoutesArgs& a) {
  mm_wait_prior_grid();  // Device::launch's early_start: the caller's kernel before it
  mm_release_dependents();
  const int wide = a.topk + a.shared, per_rank = a.experts_per_rank + a.shared;
  const i64 slots = (i64)a.tokens * wide;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < slots; i += (i64)gridDim.x * blockDim.x) {
    const int t = int(i / wide), k = int(i % wide);
    int id;
    float w;
    if (k < a.topk) {
      const int e = a.ids[(i64)t * a.topk + k];
      id = e >= 0 && e < a.experts ? e / a.experts_per_rank * per_rank + a.shared + e % a.experts_per_rank
           : e == -1              ? -1
                                  : int(kBadRouteId);
      w = a.weights[(i64)t * a.topk + k];
    } else {
      id = a.rank * per_rank + (k - a.topk);
      w = a.shared_weight;
    }
    a.wide_ids[i] = id;
    a.wide_weights[i] = w;
  }
}

}  // namespace megamoe
