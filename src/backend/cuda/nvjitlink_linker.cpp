#include "backend/cuda/nvjitlink_linker.hpp"

#include <dlfcn.h>
#include <nvJitLink.h>

#include <mutex>

#include <fmt/ranges.h>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

#define MEGAMOE_JITLINK_FUNCTIONS(X)                                                                         \
  X(nvJitLinkCreate) X(nvJitLinkDestroy) X(nvJitLinkAddData) X(nvJitLinkAddFile) X(nvJitLinkComplete)         \
  X(nvJitLinkGetLinkedCubinSize) X(nvJitLinkGetLinkedCubin) X(nvJitLinkGetErrorLogSize) X(nvJitLinkGetErrorLog) \
  X(nvJitLinkVersion)

#define MEGAMOE_QUOTE(x) #x
#define MEGAMOE_SYMBOL(x) MEGAMOE_QUOTE(x)

struct JitLink {
#define X(name) decltype(&::name) name = nullptr;
  MEGAMOE_JITLINK_FUNCTIONS(X)
#undef X
};

const JitLink& jitlink() {
  static std::mutex mutex;
  static const JitLink* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return *loaded;
  std::vector<std::string> tried;
  for (std::string path : {std::string(MEGAMOE_CUDA_LIBRARY_DIR) + "/libnvJitLink.so.13", std::string("libnvJitLink.so.13")}) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      tried.push_back(fmt::format("{} ({})", path, e ? e : "?"));
      continue;
    }
    auto* j = new JitLink();
    // The library exports the plain names beside the versioned ones nvJitLink.h's inline wrappers call.
#define X(name) j->name = reinterpret_cast<decltype(j->name)>(dlsym(lib, MEGAMOE_SYMBOL(name)));
    MEGAMOE_JITLINK_FUNCTIONS(X)
#undef X
    bool complete = true;
#define X(name) complete = complete && j->name;
    MEGAMOE_JITLINK_FUNCTIONS(X)
#undef X
    if (!complete) {
      tried.push_back(path + " (lacks an entry point this build calls)");
      continue;
    }
    loaded = j;
    return *j;
  }
  throw Error(fmt::format("megamoe: linking a kernel with NVSHMEM's device library needs nvJitLink: {}", fmt::join(tried, "; ")));
}

}  // namespace

std::string nvjitlink_identity() {
  unsigned major = 0, minor = 0;
  jitlink().nvJitLinkVersion(&major, &minor);
  return fmt::format("nvJitLink {}.{}", major, minor);
}

bool link_lto(const std::string& arch, std::string_view lto_ir, const LinkInputs& inputs, std::string& cubin,
              std::string& log) {
  const JitLink& j = jitlink();
  const std::string arch_option = "-arch=" + arch;
  const char* options[] = {arch_option.c_str(), "-lto"};
  nvJitLinkHandle h = nullptr;
  if (j.nvJitLinkCreate(&h, 2, options) != NVJITLINK_SUCCESS) throw Error("megamoe: nvJitLinkCreate failed");
  struct Destroy {
    const JitLink& j;
    nvJitLinkHandle* h;
    ~Destroy() { j.nvJitLinkDestroy(h); }
  } destroy{j, &h};
  auto fail = [&](const std::string& what) {
    std::size_t n = 0;
    std::string text;
    if (j.nvJitLinkGetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n > 1) {
      text.resize(n);
      j.nvJitLinkGetErrorLog(h, text.data());
      while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
    }
    log = fmt::format("nvJitLink: {} failed{}{}", what, text.empty() ? "" : ":\n", text);
    return false;
  };
  if (j.nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, lto_ir.data(), lto_ir.size(), "kernel") != NVJITLINK_SUCCESS)
    return fail("adding the kernel's LTO-IR");
  for (std::size_t i = 0; i < inputs.objects.size(); ++i)
    if (j.nvJitLinkAddData(h, NVJITLINK_INPUT_OBJECT, inputs.objects[i].data(), inputs.objects[i].size(),
                           fmt::format("object{}", i).c_str()) != NVJITLINK_SUCCESS)
      return fail(fmt::format("adding object {}", i));
  for (const std::string& lib : inputs.libraries)
    if (j.nvJitLinkAddFile(h, NVJITLINK_INPUT_LIBRARY, lib.c_str()) != NVJITLINK_SUCCESS)
      return fail("adding " + lib);
  if (j.nvJitLinkComplete(h) != NVJITLINK_SUCCESS) return fail("the link");
  std::size_t size = 0;
  j.nvJitLinkGetLinkedCubinSize(h, &size);
  cubin.resize(size);
  j.nvJitLinkGetLinkedCubin(h, cubin.data());
  return true;
}

}  // namespace megamoe
