#include "jit/cache_key.hpp"

#include "jit/hash.hpp"

namespace megamoe {

CacheKey make_cache_key(const CacheKeyParts& p) {
  FieldHasher h;
  h.add("name", p.name);
  h.add("generator", p.generator);
  h.add("cache_format", std::to_string(p.cache_format));
  h.add("compiler", p.compiler);
  h.add("arch", p.arch);
  for (auto& o : p.options) h.add("option", o);
  h.add("source", p.source);
  for (auto& f : p.headers) {
    h.add("header_path", f.path);
    h.add("header_text", f.text);
  }
  return {h.hex(), p.name};
}

std::string CacheKey::entry_name() const { return name + "_" + hex.substr(0, 16); }

}  // namespace megamoe
