// Precompiling a config's kernels into the cache ahead of time, through the run-time build path
// (so what it compiles is a cache hit at run time): megamoe-precompile and the Python package's
// megamoe.precompile() run it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "jit/kernel_builder.hpp"
#include "megamoe/config.hpp"

namespace megamoe {

// One distinct kernel (by key) and the buckets that launch it.
struct PrecompileJob {
  PlannedKernel planned;
  std::vector<int> buckets;
  BuildReport report;
  std::string error;  // empty when built
};

// The kernels of `buckets` (every bucket when empty) of a config on `paths`, for the single-GPU
// layer (world 1) or a rank of a group (world 2 to 16; nvshmem: of the nvshmem transport), one job
// per distinct key. `tables`: the config with each bucket table a runtime may take in use
// (configs_for_tables), a kernel that two tables share compiled once. A size that is no bucket,
// or a world out of range, is an Error.
std::vector<PrecompileJob> plan_precompile(const KernelBuilder& builder, const std::vector<Config>& tables,
                                           const std::vector<int>& buckets, const std::vector<KernelPath>& paths,
                                           int world, bool nvshmem = false);

// Builds every job on `threads` threads; progress(job, done, total) after each (under a lock).
// A kernel that fails to compile is recorded in its job's error, not thrown.
void run_precompile(KernelBuilder& builder, std::vector<PrecompileJob>& jobs, int threads,
                    const std::function<void(const PrecompileJob&, std::size_t, std::size_t)>& progress = {});

}  // namespace megamoe
