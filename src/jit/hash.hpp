// Content hashes for cache keys and checksums: XXH3-128 (xxHash, used header-only).
#pragma once
#include <string>
#include <string_view>

namespace megamoe {

// 32 lowercase hex digits.
std::string hash128_hex(std::string_view data);

// Hashes a sequence of named fields unambiguously (each name and value length-prefixed).
class FieldHasher {
 public:
  FieldHasher();
  ~FieldHasher();
  FieldHasher(const FieldHasher&) = delete;
  FieldHasher& operator=(const FieldHasher&) = delete;
  void add(std::string_view name, std::string_view value);
  std::string hex() const;

 private:
  void* state_;
};

}  // namespace megamoe
