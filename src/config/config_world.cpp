// A config as one rank of a group runs it: the experts a rank holds, from the model's and the
// world size.
#include <string>

#include <fmt/format.h>

#include "interface/kernel_constants.cuh"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

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

}  // namespace megamoe
