// What the GPU tests that compare two runtimes' bits share: one call's outputs, and how many of
// two calls' outputs differ.
#pragma once
#include <cstdint>
#include <vector>

#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"

namespace megamoe::test {

// The call's outputs (bf16 bits) from `rt` with `weights` on x and the routing `r`, its output
// poisoned first; the call must report no errors.
std::vector<std::uint16_t> layer_outputs(Runtime& rt, const PreparedWeights& weights, const workload::Routing& r,
                                         const std::vector<std::uint16_t>& x, std::int64_t tokens);

// Of two calls' outputs: how many differ, and how many of the first are NaN.
struct BitsDiff {
  std::size_t differ = 0, nan = 0;
};
BitsDiff diff_bits(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b);

}  // namespace megamoe::test
