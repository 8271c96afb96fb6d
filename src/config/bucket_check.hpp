// The part of the shape contract that a bucket entry's values must meet together (beyond each
// field's own range, which the schema checks as it reads the JSON): a static h scale only for a
// bounded activation, and each stage's tiles within what its form allows on the Hopper path.
// parse_config runs it on every bucket; megamoe-tune prunes its candidates with it.
#pragma once
#include <string>

#include "megamoe/config.hpp"

namespace megamoe {

// Throws ConfigError naming `file`, `path` + the field, the value and what it allows.
void check_bucket(const Config& config, const BucketConfig& bucket, const std::string& path, const std::string& file);

}  // namespace megamoe
