#include "runtime/rank_options.hpp"

#include <utility>

#include <fmt/format.h>

#include "config/shared_slots.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/errors.hpp"

namespace megamoe {

Config config_for_options(Config config, const RuntimeOptions& o) {
  if (o.world < 1 || o.world > kMaxWorld)
    throw Error(fmt::format("megamoe: RuntimeOptions.world = {}, expected 1..{}", o.world, int(kMaxWorld)));
  if (o.redundant_experts != 0) {
    config = with_redundant_experts(std::move(config), o.redundant_experts);
    if (config.model.experts % o.world) {
      int fits = o.redundant_experts;
      while ((config.model.logical_experts + fits) % o.world) ++fits;
      throw Error(fmt::format("megamoe: RuntimeOptions.redundant_experts = {}: {} logical experts + {} = {} slots, which "
                              "world = {} does not divide (every rank holds slots / world); {} would",
                              o.redundant_experts, config.model.logical_experts, o.redundant_experts,
                              config.model.experts, o.world, fits));
    }
  }
  config = config_for_world(std::move(config), o.world);
  shared_slots_config(config);  // its slots' limits checked here, before a GPU is opened
  return config;
}

GroupOptions group_options(const RuntimeOptions& o) {
  GroupOptions g;
  g.world = o.world, g.rank = o.rank, g.transport = o.transport, g.all_gather = o.all_gather;
  g.node_size = o.node_size, g.timeout_ms = o.timeout_ms, g.max_tokens = o.max_tokens;
  g.routed_rows_capacity = o.routed_rows_capacity;
  return g;
}

}  // namespace megamoe
