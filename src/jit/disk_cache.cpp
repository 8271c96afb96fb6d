#include "jit/disk_cache.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/env.hpp"
#include "common/diagnostics.hpp"
#include "jit/hash.hpp"

namespace megamoe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kSource = "kernel.cu";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const fs::path& p, std::string_view data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
  out.close();
  if (!out) throw fs::filesystem_error("cannot write", p, std::make_error_code(std::errc::io_error));
}

// A name unique to this process, thread and moment, for temp and moved-aside folders.
std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return fmt::format("{}.{}.{}.{}", getpid(), std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000,
                     now, counter++);
}

json file_record(const std::string& file, std::string_view data) {
  return {{"file", file}, {"size", data.size()}, {"xxh3_128", hash128_hex(data)}};
}

// Empty when `dir` holds an intact entry for `key`; otherwise what is wrong with it.
std::string check_entry(const fs::path& dir, const CacheKey& key, std::string& binary) {
  json m;
  try {
    m = json::parse(read_all(dir / kManifest));
  } catch (const std::exception& e) {
    return fmt::format("manifest unreadable ({})", e.what());
  }
  try {
    if (m.at("format_version").get<int>() != kCacheFormatVersion) return "manifest has another format version";
    if (m.at("key").get<std::string>() != key.hex) return "manifest key differs from the entry's key";
    const json& b = m.at("binary");
    binary = read_all(dir / b.at("file").get<std::string>());
    if (binary.size() != b.at("size").get<std::size_t>())
      return fmt::format("binary is {} bytes, manifest says {}", binary.size(), b.at("size").get<std::size_t>());
    if (hash128_hex(binary) != b.at("xxh3_128").get<std::string>()) return "binary checksum mismatch";
  } catch (const std::exception& e) {
    return fmt::format("manifest incomplete or entry file missing ({})", e.what());
  }
  return {};
}

}  // namespace

DiskCache::DiskCache(fs::path root) : root_(std::move(root)) {}

fs::path DiskCache::default_root() {
  if (env_flag("MEGAMOE_DISABLE_CACHE")) return {};
  if (const char* d = std::getenv("MEGAMOE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "megamoe";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "megamoe";
  return fs::temp_directory_path() / "megamoe-cache";
}

fs::path DiskCache::versioned_root() const { return root_ / fmt::format("v{}", kCacheFormatVersion); }
fs::path DiskCache::entry_dir(const CacheKey& key) const { return versioned_root() / key.entry_name(); }

void DiskCache::fall_back_to_memory(const std::string& why) {
  if (!fell_back_.exchange(true))
    warn(fmt::format("kernel cache {} is not writable ({}); compiled kernels are kept in memory only",
                     root_.string(), why));
}

void DiskCache::move_aside(const fs::path& dir, const std::string& why) {
  fs::path dest = versioned_root() / ".corrupt" / (dir.filename().string() + "." + unique_suffix());
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (!ec) fs::rename(dir, dest, ec);
  if (!ec)
    warn(fmt::format("cache entry {} is corrupt ({}); moved to {} and recompiling", dir.string(), why, dest.string()));
  else if (fs::exists(dir))  // another process may have moved it first; then say nothing
    warn(fmt::format("cache entry {} is corrupt ({}) and could not be moved aside ({}); recompiling",
                     dir.string(), why, ec.message()));
}

std::optional<std::string> DiskCache::load(const CacheKey& key) {
  if (!enabled()) return std::nullopt;
  fs::path dir = entry_dir(key);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::string binary;
  std::string problem = check_entry(dir, key, binary);
  if (problem.empty()) return binary;
  move_aside(dir, problem);
  return std::nullopt;
}

std::string DiskCache::unwritable_reason() const {
  if (!enabled()) return "the cache is disabled (MEGAMOE_DISABLE_CACHE=1)";
  std::error_code ec;
  fs::create_directories(versioned_root(), ec);
  if (ec) return ec.message();
  const fs::path probe = versioned_root() / (".probe." + unique_suffix());
  if (!std::ofstream(probe, std::ios::binary)) return std::strerror(errno);
  fs::remove(probe, ec);
  return "";
}

std::string DiskCache::inspect(const CacheKey& key) const {
  if (!enabled()) return "";
  const fs::path dir = entry_dir(key);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::string binary;
  const std::string problem = check_entry(dir, key, binary);
  return problem.empty() ? "intact" : problem;
}

PublishResult DiskCache::publish(const CacheKey& key, const CacheEntryContents& c) {
  if (!writable()) return PublishResult::not_writable;
  fs::path tmp = versioned_root() / ".tmp" / (key.entry_name() + "." + unique_suffix());
  try {
    fs::create_directories(tmp);
    std::string binary_file = "kernel." + c.binary_suffix;
    write_all(tmp / binary_file, c.binary);
    write_all(tmp / kSource, c.source);
    json m = {{"format_version", kCacheFormatVersion},
              {"key", key.hex},
              {"name", key.name},
              {"generator", kGeneratorVersion},
              {"compiler", c.compiler},
              {"arch", c.arch},
              {"options", c.options},
              {"headers", c.header_paths},
              {"binary", file_record(binary_file, c.binary)},
              {"source", file_record(kSource, c.source)},
              {"compile_seconds", c.compile_seconds},
              {"created_unix", std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count()}};
    write_all(tmp / kManifest, m.dump(2) + "\n");  // last: its presence marks a complete entry
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    fall_back_to_memory(e.what());
    return PublishResult::not_writable;
  }
  std::error_code ec;
  fs::rename(tmp, entry_dir(key), ec);
  if (!ec) return PublishResult::published;
  std::error_code ignored;
  fs::remove_all(tmp, ignored);
  if (ec == std::errc::directory_not_empty || ec == std::errc::file_exists) return PublishResult::lost_race;
  fall_back_to_memory(ec.message());
  return PublishResult::not_writable;
}

fs::path DiskCache::save_failed_source(const CacheKey& key, const std::string& source) {
  std::vector<fs::path> places;
  if (writable()) places.push_back(versioned_root() / ".failed");
  places.push_back(fs::temp_directory_path() / "megamoe-failed");
  for (auto& dir : places) {
    try {
      fs::create_directories(dir);
      fs::path p = dir / (key.entry_name() + ".cu");
      write_all(p, source);
      return p;
    } catch (const std::exception&) {
    }
  }
  return "(could not be saved)";
}

}  // namespace megamoe
