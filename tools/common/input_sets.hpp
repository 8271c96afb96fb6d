// The timed tools' inputs for one batch size: enough input sets (x, routing, a poisoned y) that a
// burst of calls, one a set, finds none of them in the 60 MB L2 (megamoe-bench, megamoe-tune).
#pragma once
#include <cstdint>
#include <vector>

#include "megamoe/megamoe.hpp"

namespace megamoe::workload {

// One call's inputs, and its output poisoned.
struct InputSet {
  DeviceBuffer x, ids, w, y;
};

struct InputSets {
  std::vector<InputSet> sets;  // together three times the L2, 2 to 64 of them
  int experts_touched = 0;     // by the first set's routing
  long long pairs = 0;         // the first set's routed (token, expert) pairs
};

// `tokens` tokens a set, uniform routing over the shape's experts_per_rank, x from N(0, 1): from
// the seed and the size alone (inputs_rng).
InputSets make_input_sets(Device& dev, const ModelShape& m, std::int64_t tokens, std::uint64_t seed);

}  // namespace megamoe::workload
