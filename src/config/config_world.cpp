// A config as one rank of a group runs it: the experts a rank holds, from the model's and the
// world size.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "interface/kernel_constants.cuh"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"
#include "config/shared_slots.hpp"

namespace megamoe {

static_assert(kMaxExpertsPerRank == kMaxExperts, "the routing kernels' per-rank expert limit");

Config config_for_world(Config c, int world) {
  const int E = c.model.experts;
  if (world < 1) throw Error(fmt::format("megamoe: config {}: world = {}, expected at least 1", c.name, world));
  if (E < 1 || E > kMaxGlobalExperts)
    throw Error(fmt::format("megamoe: config {}: model.experts = {}, expected 1..{} (the group routing's limit)", c.name,
                            E, int(kMaxGlobalExperts)));
  if (E % world) {
    std::string sizes;
    for (int w = 1; w <= kMaxWorld; ++w)
      if (E % w == 0) sizes += (sizes.empty() ? "" : ", ") + std::to_string(w);
    throw Error(fmt::format("megamoe: config {}: model.experts = {} is not a multiple of world = {}: every rank holds "
                            "experts / world of them (world sizes that divide {}, up to {}: {})",
                            c.name, E, world, E, int(kMaxWorld), sizes));
  }
  if (E / world > kMaxExpertsPerRank)
    throw Error(fmt::format("megamoe: config {}: model.experts = {} over world = {} leaves {} experts a rank, expected at "
                            "most {} (the routing kernels' limit): run it over more ranks",
                            c.name, E, world, E / world, kMaxExpertsPerRank));
  c.world = world;
  c.model.experts_per_rank = E / world;
  if (c.model.logical_experts <= 0) c.model.logical_experts = E;  // a shape made by hand: no redundant slots
  if (c.keys_experts_per_rank <= 0) c.keys_experts_per_rank = E;
  return c;
}

Config with_experts(Config c, int experts) {
  if (experts < 1 || experts > kMaxGlobalExperts)
    throw Error(fmt::format("megamoe: config {}: {} experts, expected 1..{}", c.name, experts, int(kMaxGlobalExperts)));
  if (c.keys_experts_per_rank <= 0) c.keys_experts_per_rank = c.model.experts;
  c.name += fmt::format("_{}_experts", experts);
  c.model.experts = c.model.experts_per_rank = c.model.logical_experts = experts;  // world 1's, as a parsed config's
  c.world = 1;
  return c;
}

Config with_redundant_experts(Config c, int redundant) {
  if (c.model.logical_experts <= 0) c.model.logical_experts = c.model.experts;
  const int physical = c.model.logical_experts + redundant;
  if (redundant < 0 || physical > kMaxGlobalExperts)
    throw Error(fmt::format("megamoe: config {}: redundant_experts = {}, expected 0..{} ({} logical experts, at most {} "
                            "slots in all)",
                            c.name, redundant, int(kMaxGlobalExperts) - c.model.logical_experts, c.model.logical_experts,
                            int(kMaxGlobalExperts)));
  if (redundant == 0) return c;
  if (c.keys_experts_per_rank <= 0) c.keys_experts_per_rank = c.model.experts;
  c.name += fmt::format("_plus_{}_slots", redundant);
  c.model.experts = c.model.experts_per_rank = physical;  // world 1's, until config_for_world
  c.world = 1;
  return c;
}

Config with_shared_experts(Config c, int count, float scale) {
  if (count < 0 || count > kMaxSharedExperts || c.model.topk + count > kMaxSlotsPerToken)
    throw Error(fmt::format("megamoe: config {}: shared_experts = {}, expected 0..{} (and topk {} + shared_experts at "
                            "most {}: a token's routed and shared rows together)",
                            c.name, count, std::min<int>(kMaxSharedExperts, kMaxSlotsPerToken - c.model.topk),
                            c.model.topk, int(kMaxSlotsPerToken)));
  if (!std::isfinite(scale))
    throw Error(fmt::format("megamoe: config {}: shared_expert_scale = {}, expected a finite number", c.name, scale));
  if (count == c.model.shared_experts && (count == 0 || scale == c.model.shared_expert_scale)) return c;
  c.name += count ? fmt::format("_with_{}_shared", count) : std::string("_without_shared");
  c.model.shared_experts = count;
  c.model.shared_expert_scale = count ? scale : 1.f;
  return c;
}

Config shared_slots_config(Config c) {
  const int S = c.model.shared_experts;
  if (S == 0) return c;
  const int per_rank = c.model.experts_per_rank + S;
  if (per_rank > kMaxExpertsPerRank || c.world * per_rank > kMaxGlobalExperts)
    throw Error(fmt::format("megamoe: config {}: {} experts a rank and {} shared ones take {} slots a rank ({} over world "
                            "{}), expected at most {} a rank and {} in all (the routing kernels' limits)",
                            c.name, c.model.experts_per_rank, S, per_rank, c.world * per_rank, c.world,
                            int(kMaxExpertsPerRank), int(kMaxGlobalExperts)));
  c.model.experts_per_rank = per_rank;
  c.model.experts = c.world * per_rank;
  c.model.topk += S;
  return c;
}

}  // namespace megamoe
