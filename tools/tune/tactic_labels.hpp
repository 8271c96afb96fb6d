// A bucket entry's knobs as the tuner's report and journal label them.
#pragma once
#include <string>

#include "megamoe/config.hpp"

namespace megamoe::tune {

// The knobs a bucket's kernels read, short: "s1 176x128 s2 160x128 mxfp4 x row h static wire bf16".
std::string tactic_label(const BucketConfig& b);
// The dispatch knobs, short: "dispatch 64 stride 1" (", persistent" where they are).
std::string dispatch_label(const BucketConfig& b);

}  // namespace megamoe::tune
