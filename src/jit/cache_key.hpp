// A kernel's cache key, built from named parts: whatever can change the binary is one of them.
#pragma once
#include <string>
#include <vector>

#include "common/source_file.hpp"

namespace megamoe {

// Bumped whenever the code generator changes what it renders for the same spec.
inline constexpr const char* kGeneratorVersion = "megamoe-codegen/1";
// Bumped whenever the on-disk layout of a cache entry changes (docs/cache.md).
inline constexpr int kCacheFormatVersion = 1;

struct CacheKeyParts {
  std::string name;                  // readable kernel name
  std::string generator = kGeneratorVersion;
  int cache_format = kCacheFormatVersion;
  std::string compiler;              // "nvrtc 13.0"
  std::string arch;                  // "sm_90a"
  std::vector<std::string> options;  // every compile option
  std::string source;                // the rendered translation unit
  std::vector<SourceFile> headers;   // text of every header it includes
};

struct CacheKey {
  std::string hex;  // 32 hex digits over all parts
  std::string entry_name() const;  // "<name>_<first 16 hex digits>": the cache folder
  std::string name;
};

CacheKey make_cache_key(const CacheKeyParts& parts);

}  // namespace megamoe
