#include "tune/tactic_labels.hpp"

#include <fmt/format.h>

namespace megamoe::tune {

std::string tactic_label(const BucketConfig& b) {
  return fmt::format("s1 {}x{} s2 {}x{} {} x {} h {} wire {}", b.stage1.token_tile, b.stage1.weight_tile,
                     b.stage2.token_tile, b.stage2.weight_tile, to_string(b.weights), to_string(b.x_scale),
                     to_string(b.h_scale), b.combine_wire == CombineWire::bf16 ? "bf16" : "fp8");
}

std::string dispatch_label(const BucketConfig& b) {
  return fmt::format("dispatch {} stride {}{}", b.dispatch.cus, b.dispatch.stride,
                     b.dispatch.persistent ? " persistent" : "");
}

}  // namespace megamoe::tune
