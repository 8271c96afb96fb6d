#include "common/cli.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe::cli {

void usage_error(const char* tool, const std::string& message) {
  fmt::print(stderr, "{}: {}\n(see --help)\n", tool, message);
  std::exit(2);
}

int run_reporting_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const NoGpuError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}

std::string next_value(const char* tool, int argc, char** argv, int& i) {
  if (i + 1 >= argc) usage_error(tool, std::string(argv[i]) + " needs a value");
  return argv[++i];
}

std::int64_t parse_int(const char* tool, const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    std::int64_t n = std::stoll(value, &used);
    if (used == value.size()) return n;
  } catch (...) {
  }
  usage_error(tool, fmt::format("{} expects an integer, got '{}'", flag, value));
}

double parse_number(const char* tool, const std::string& flag, const std::string& value, double lo, double hi,
                    const std::string& expected) {
  try {
    std::size_t used = 0;
    const double x = std::stod(value, &used);
    if (used == value.size() && std::isfinite(x) && x >= lo && x <= hi) return x;
  } catch (...) {
  }
  usage_error(tool, fmt::format("{} expects {}, got '{}'", flag, expected, value));
}

KernelPath parse_path(const char* tool, const std::string& value) {
  try {
    return path_from_name(value);
  } catch (const Error&) {
    usage_error(tool, fmt::format("--path expects auto, portable, tensor_core or hopper, got '{}'", value));
  }
}

std::vector<std::int64_t> parse_int_list(const char* tool, const std::string& flag, const std::string& value) {
  std::vector<std::int64_t> v;
  for (std::size_t pos = 0;;) {
    std::size_t end = value.find(',', pos);
    std::string item = value.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    std::size_t used = 0;
    try {
      v.push_back(std::stoll(item, &used));
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v.back() < 0)
      usage_error(tool, fmt::format("{} expects comma-separated non-negative integers, got '{}'", flag, value));
    if (end == std::string::npos) return v;
    pos = end + 1;
  }
}

Config load_for_world(const std::string& name_or_path, int world, int experts_per_rank) {
  Config c = load_config(name_or_path);
  return experts_per_rank > 0 ? with_experts(std::move(c), experts_per_rank * world) : c;
}

}  // namespace megamoe::cli
