// Finding a config by name or path, and the environment switches that apply to every config.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/embedded_files.hpp"
#include "common/env.hpp"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("megamoe: cannot read config file {}", p.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Config checked(Config c, const std::string& expected_name) {
  if (!expected_name.empty() && c.name != expected_name)
    throw ConfigError(c.source, "$.name", "\"" + c.name + "\"",
                      fmt::format("\"{}\" (the file's name)", expected_name));
  if (env_flag("MEGAMOE_BOUNDS_CHECK")) {
    for (auto& b : c.buckets) b.bounds_check = true;
    for (BucketTable& t : c.tables)
      for (auto& b : t.buckets) b.bounds_check = true;
  }
  return c;
}

}  // namespace

std::vector<std::string> builtin_config_names() {
  std::vector<std::string> names;
  for (auto& f : embedded::configs()) names.emplace_back(fs::path(f.path).stem().string());
  return names;
}

Config load_config(std::string_view name_or_path) {
  std::string arg(name_or_path);
  if (arg.ends_with(".json")) {
    fs::path p(arg);
    return checked(parse_config(read_file(p), p.string()), p.stem().string());
  }
  if (const char* dir = std::getenv("MEGAMOE_CONFIG_DIR"); dir && *dir) {
    fs::path p = fs::path(dir) / (arg + ".json");
    if (fs::exists(p)) return checked(parse_config(read_file(p), p.string()), arg);
  }
  for (auto& f : embedded::configs())
    if (fs::path(f.path).stem().string() == arg)
      return checked(parse_config(f.text, "<builtin>/" + std::string(f.path)), arg);
  std::string known;
  for (auto& n : builtin_config_names()) known += (known.empty() ? "" : ", ") + n;
  if (const char* dir = std::getenv("MEGAMOE_CONFIG_DIR"); dir && *dir) {
    // The folder was searched first: say what is there, not to set what is set.
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") found.push_back(e.path().stem().string());
    std::sort(found.begin(), found.end());
    std::string there;
    for (auto& n : found) there += (there.empty() ? "" : ", ") + n;
    throw ConfigError::not_found(
        arg, fmt::format("MEGAMOE_CONFIG_DIR={} searched: {}; built-in: {}; or pass a path ending in .json", dir,
                         ec ? "cannot be read (" + ec.message() + ")"
                            : there.empty() ? std::string("no .json files there") : "it holds " + there,
                         known));
  }
  throw ConfigError::not_found(arg, fmt::format("built-in: {}; or set MEGAMOE_CONFIG_DIR, or pass a path ending in "
                                                ".json",
                                                known));
}

}  // namespace megamoe
