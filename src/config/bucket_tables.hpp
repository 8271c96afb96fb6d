// The bucket tables a config holds (docs/configs.md, "A table per card"), for the config's own
// readers and writers.
#pragma once
#include <vector>

#include "megamoe/config.hpp"

namespace megamoe {

// The config's tables, default first; one built in code may hold none but its table in use.
std::vector<BucketTable> tables_of(const Config& c);

}  // namespace megamoe
