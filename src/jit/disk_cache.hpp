// The on-disk kernel cache (layout and guarantees in docs/cache.md).
//   <root>/v<format>/<name>_<hash16>/{kernel.<suffix>, kernel.cu, manifest.json}
// An entry is written in <root>/v<format>/.tmp/ and renamed into place, the manifest last;
// whoever loses a publishing race drops its copy. A corrupt entry is moved to .corrupt/.
#pragma once
#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "jit/cache_key.hpp"

namespace megamoe {

struct CacheEntryContents {
  std::string binary;
  std::string binary_suffix;  // "cubin", "hsaco"
  std::string source;
  std::string compiler, arch;
  std::vector<std::string> options;
  std::vector<std::string> header_paths;
  double compile_seconds = 0;
};

enum class PublishResult { published, lost_race, not_writable };

class DiskCache {
 public:
  // An empty root means no disk cache (memory only).
  explicit DiskCache(std::filesystem::path root);

  // $MEGAMOE_CACHE_DIR, else $XDG_CACHE_HOME/megamoe, else ~/.cache/megamoe; empty when
  // MEGAMOE_DISABLE_CACHE=1.
  static std::filesystem::path default_root();

  bool enabled() const { return !root_.empty(); }
  bool writable() const { return enabled() && !fell_back_.load(); }
  // Why no entry could be written here now (tried by making the folder and a file in it), or ""
  // where one can: what a caller that only fills the cache asks before it compiles.
  std::string unwritable_reason() const;
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path versioned_root() const;
  std::filesystem::path entry_dir(const CacheKey& key) const;

  // The entry's binary when present and intact; nullopt on a miss. A corrupt entry is moved
  // aside with one warning and counts as a miss.
  std::optional<std::string> load(const CacheKey& key);

  // What a load would find, touching nothing: "" (no entry), "intact", or what is wrong with it.
  std::string inspect(const CacheKey& key) const;

  PublishResult publish(const CacheKey& key, const CacheEntryContents& contents);

  // Saves a failed kernel's source for the user to read; returns its path.
  std::filesystem::path save_failed_source(const CacheKey& key, const std::string& source);

 private:
  void fall_back_to_memory(const std::string& why);
  void move_aside(const std::filesystem::path& dir, const std::string& why);

  std::filesystem::path root_;
  std::atomic<bool> fell_back_{false};
};

}  // namespace megamoe
