// A rank's options resolved: the config it runs, and the fields its group's set-up reads.
#pragma once
#include "ep/group_options.hpp"
#include "megamoe/config.hpp"
#include "megamoe/runtime.hpp"

namespace megamoe {

// `config` as a rank created with `options` runs it: its redundant slots added
// (with_redundant_experts), resolved for options.world (config_for_world). Throws megamoe::Error
// naming world or redundant_experts where they do not fit the model.
Config config_for_options(Config config, const RuntimeOptions& options);

// RuntimeOptions's group fields, for ep/.
GroupOptions group_options(const RuntimeOptions& options);

}  // namespace megamoe
