// What the GPU tests share: a call's buffers on the device, one call's outputs, and how many of
// two calls' outputs differ.
#pragma once
#include <cstdint>
#include <vector>

#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"

namespace megamoe::test {

// A call's device buffers: x, the routing's ids and weights uploaded, y poisoned (0xFF) with
// `past_y` bytes beyond it, so that a write past y shows.
struct CallBuffers {
  DeviceBuffer x, ids, weights, y;
};
CallBuffers upload_call(Device& device, const std::vector<std::uint16_t>& x, const workload::Routing& r,
                        std::size_t past_y = 0);

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
