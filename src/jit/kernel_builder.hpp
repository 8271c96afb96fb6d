// The one build path, used by the run-time call and the precompile tool alike:
//   spec -> render -> key -> memory -> disk cache -> compile -> publish.
// Thread-safe; in one process each key is compiled at most once (double-checked locking on a
// per-key slot, so different keys compile in parallel).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/backend.hpp"
#include "codegen/kernel_spec.hpp"
#include "jit/cache_key.hpp"
#include "jit/disk_cache.hpp"

namespace megamoe {

struct BuiltKernel {
  CacheKey key;
  std::string symbol;  // entry point in the binary
  std::string binary;
  int threads = 0;
};

enum class BuildOrigin { memory, disk, compiled };
std::string_view to_string(BuildOrigin origin);

struct BuildReport {
  std::shared_ptr<const BuiltKernel> kernel;
  BuildOrigin origin = BuildOrigin::compiled;
  double seconds = 0;  // wall time of this call
};

// A spec rendered and keyed, not yet built.
struct PlannedKernel {
  RenderedKernel rendered;
  std::vector<std::string> options;
  LinkInputs link;  // what the kernel is linked with (none for most)
  CacheKey key;
};

class KernelBuilder {
 public:
  // An empty cache_root keeps kernels in memory only.
  KernelBuilder(std::shared_ptr<const Compiler> compiler, std::string arch,
                std::filesystem::path cache_root);

  PlannedKernel plan(const KernelSpec& spec) const;
  BuildReport build(const PlannedKernel& planned);
  BuildReport build(const KernelSpec& spec) { return build(plan(spec)); }

  const Compiler& compiler() const { return *compiler_; }
  const std::string& arch() const { return arch_; }
  DiskCache& cache() { return cache_; }

 private:
  struct Slot {
    std::mutex mutex;
    std::shared_ptr<const BuiltKernel> kernel;
  };

  std::shared_ptr<const Compiler> compiler_;
  std::string arch_;
  std::string compiler_identity_;
  DiskCache cache_;
  std::mutex slots_mutex_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;
};

// The process-wide builder for a backend and arch, over DiskCache::default_root().
KernelBuilder& shared_kernel_builder(BackendKind backend, const std::string& arch);

}  // namespace megamoe
