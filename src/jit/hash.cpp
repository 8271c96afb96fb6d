#include "jit/hash.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

namespace megamoe {

namespace {
std::string to_hex(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }
}  // namespace

std::string hash128_hex(std::string_view data) { return to_hex(XXH3_128bits(data.data(), data.size())); }

FieldHasher::FieldHasher() : state_(XXH3_createState()) { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }
FieldHasher::~FieldHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void FieldHasher::add(std::string_view name, std::string_view value) {
  auto* s = static_cast<XXH3_state_t*>(state_);
  std::string head = fmt::format("{}:{}:{}:", name.size(), name, value.size());
  XXH3_128bits_update(s, head.data(), head.size());
  XXH3_128bits_update(s, value.data(), value.size());
}

std::string FieldHasher::hex() const { return to_hex(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_))); }

}  // namespace megamoe
