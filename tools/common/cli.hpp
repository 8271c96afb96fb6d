// Command-line helpers shared by the tools: usage errors (exit status 2) and their arguments.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "megamoe/config.hpp"

namespace megamoe::cli {

[[noreturn]] void usage_error(const char* tool, const std::string& message);

// The argument after argv[i] (i moves to it), or a usage error naming the flag.
std::string next_value(const char* tool, int argc, char** argv, int& i);

std::int64_t parse_int(const char* tool, const std::string& flag, const std::string& value);
// "auto", "portable" or "tensor_core".
KernelPath parse_path(const char* tool, const std::string& value);

// Comma-separated non-negative integers.
std::vector<std::int64_t> parse_int_list(const char* tool, const std::string& flag, const std::string& value);

}  // namespace megamoe::cli
