// The tools' command lines: each tool's flags are one CLI11 table (its --help is generated from
// it), parsed here with the same exits and words everywhere: --help exits 0, a bad flag or value
// exits 2 with "TOOL: MESSAGE" on stderr. The validators below word the values' errors alike.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "megamoe/config.hpp"

namespace megamoe::cli {

// A tool's flag table: CLI11's App named `tool`, `description` over the flags, `exits` (what its
// exit statuses mean) under them.
void describe(CLI::App& app, const std::string& tool, const std::string& description, const std::string& exits);

// Parses argv against the table (exits 0 after --help, 2 on a usage error).
void parse(CLI::App& app, int argc, char** argv);

// A usage error found after parsing (a rule across flags): "TOOL: MESSAGE" and exit status 2.
[[noreturn]] void usage_error(const std::string& tool, const std::string& message);

// A tool's work after its arguments: body's status, or, for an exception, its message on stderr
// and 3 for NoGpuError (no GPU present), 1 for any other.
int run_reporting_errors(const std::function<int()>& body);

// Values, in one set of words: "expects a count of at least 1, got 0".
CLI::Validator at_least(std::int64_t lo, const std::string& what = "a count");
CLI::Validator in_range(std::int64_t lo, std::int64_t hi);
CLI::Validator finite(double lo, double hi, const std::string& what);
// One of `names`: "expects a, b or c, got 'x'".
CLI::Validator one_of(std::vector<std::string> names);
std::string either(const std::vector<std::string>& names);  // "a, b or c"

// --config NAME: a built-in config's name, or a path ending in .json.
CLI::Option* add_config(CLI::App& app, std::string& name);
// --experts-per-rank N: each rank holds N experts, the model cut to N x W in all; lo: the least N
// taken (0 meaning the config's own).
CLI::Option* add_experts_per_rank(CLI::App& app, int& n, int lo);

// --bucket-table CARD: the config's bucket table of that card (its name as the driver gives it, or
// "default") instead of the GPU's own (docs/configs.md, "A table per card").
CLI::Option* add_bucket_table(CLI::App& app, std::string& card, const std::string& when_empty);

// --path P: the expert-GEMM kernels (auto, portable, tensor_core, hopper), into `path`.
CLI::Option* add_path(CLI::App& app, KernelPath& path);
// A comma-separated list of integers each at least `lo` (--bs 1,8,128).
CLI::Option* add_int_list(CLI::App& app, const std::string& flag, std::vector<std::int64_t>& values,
                          const std::string& help, std::int64_t lo);

}  // namespace megamoe::cli
