// A config as the JSON that parse_config reads (docs/configs.md), beside the parser: the table
// megamoe-tune writes, and a bucket entry as one line of text (the tuner's journal keys).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "megamoe/config.hpp"

namespace megamoe {

// Every field of a bucket entry, as a bucket of the schema holds them.
nlohmann::ordered_json entry_json(const BucketConfig& b);
// entry_json on one line: equal entries give equal text.
std::string entry_text(const BucketConfig& b);

// The bucket entry of `bucket` from entry_text's text, read through the schema (so a journal's
// entry meets the contract for `config` as a config file's would).
BucketConfig entry_from_text(const Config& config, int bucket, const std::string& text);

// `config` (a parsed one, at world 1: model.experts is the model's) as a config file named `name`
// with `description`: its model, activation, formats and bucket keys, its most common entry as
// bucket_defaults and each bucket's differences from it. parse_config reads it back to `config`.
nlohmann::ordered_json config_json(const Config& config, const std::string& name, const std::string& description);

// A config's JSON as the built-in configs are written: a line a top-level field, a line a field of
// bucket_defaults and a line a bucket.
std::string config_text(const nlohmann::ordered_json& config);

}  // namespace megamoe
