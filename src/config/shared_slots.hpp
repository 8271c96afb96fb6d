// How the kernels run a model's shared experts (docs/layer.md, "Shared experts"): as
// shared_experts more slots on every rank, ahead of the rank's routed experts (their rows are the
// rank's own tokens, so their tiles need no other rank's rows and come first), and as
// shared_experts more slots of every token after its topk routed ones (combine sums them last).
// A caller's id e (rank e / experts_per_rank, local e % experts_per_rank) becomes the kernels'
// rank x (experts_per_rank + S) + S + local; shared expert j of a token of rank r becomes
// r x (experts_per_rank + S) + j. The shared_routes kernel widens a call's ids and weights so.
#pragma once
#include "megamoe/config.hpp"

namespace megamoe {

// `config` (resolved for its world) as the kernels run it: experts_per_rank + S slots a rank,
// world x that in all, topk + S slots a token; model.shared_experts kept. S = 0: unchanged.
// An Error where the slots pass the routing kernels' limits.
Config shared_slots_config(Config config);

}  // namespace megamoe
