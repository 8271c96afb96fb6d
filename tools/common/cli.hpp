// Command-line helpers shared by the tools: usage errors (exit status 2) and their arguments.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "megamoe/config.hpp"

namespace megamoe::cli {

[[noreturn]] void usage_error(const char* tool, const std::string& message);

// A tool's work after its arguments: body's status, or, for an exception, its message on stderr
// and 3 for NoGpuError (no GPU present), 1 for any other.
int run_reporting_errors(const std::function<int()>& body);

// The argument after argv[i] (i moves to it), or a usage error naming the flag.
std::string next_value(const char* tool, int argc, char** argv, int& i);

std::int64_t parse_int(const char* tool, const std::string& flag, const std::string& value);
// A finite number in [lo, hi], or a usage error naming the flag, the value and `expected`.
double parse_number(const char* tool, const std::string& flag, const std::string& value, double lo, double hi,
                    const std::string& expected);
// "auto", "portable" or "tensor_core".
KernelPath parse_path(const char* tool, const std::string& value);

// A config by name or path for `world` ranks; with experts_per_rank > 0, the model cut to
// experts_per_rank x world experts (with_experts): one rank's share of a wider group, such as
// Kimi-K3's 112 experts of EP8 at world 1.
Config load_for_world(const std::string& name_or_path, int world, int experts_per_rank);

// Comma-separated non-negative integers.
std::vector<std::int64_t> parse_int_list(const char* tool, const std::string& flag, const std::string& value);

}  // namespace megamoe::cli
