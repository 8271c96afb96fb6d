#include "backend/hip/hip_library.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe::hip {

const Library& library() {
  static Library lib = [] {
    Library l;
    void* h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      l.load_error = fmt::format("no GPU driver found (libamdhip64 could not be loaded: {})", e ? e : "?");
      return l;
    }
#define X(name)                                                     \
  l.name = reinterpret_cast<decltype(l.name)>(dlsym(h, #name));     \
  if (!l.name && l.load_error.empty())                              \
    l.load_error = fmt::format("libamdhip64 lacks {}", #name);
    MEGAMOE_HIP_FUNCTIONS(X)
    X(hipMalloc)
#undef X
    return l;
  }();
  return lib;
}

const Library& loaded_library() {
  const Library& l = library();
  if (!l.load_error.empty()) throw NoGpuError("megamoe: " + l.load_error);
  return l;
}

}  // namespace megamoe::hip
