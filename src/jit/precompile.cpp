#include "jit/precompile.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "codegen/layer_kernels.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/errors.hpp"

namespace megamoe {

std::vector<PrecompileJob> plan_precompile(const KernelBuilder& builder, const std::vector<Config>& tables,
                                           const std::vector<int>& buckets, const std::vector<KernelPath>& paths,
                                           int world, bool nvshmem) {
  if (world < 1 || world > kMaxWorld)
    throw Error(fmt::format("megamoe: precompile: world = {}, expected 1..{}", world, int(kMaxWorld)));
  std::vector<PrecompileJob> jobs;
  std::map<std::string, std::size_t> by_key;
  for (const Config& config : tables) {
    std::vector<int> list = buckets;
    if (list.empty())
      for (const BucketConfig& b : config.buckets) list.push_back(b.bucket);
    for (KernelPath path : paths)
      for (int b : list)
        for (const KernelSpec& spec : kernels_for_bucket(config, config.bucket(b), path, world, nvshmem)) {
          PlannedKernel p = builder.plan(spec);
          auto [it, fresh] = by_key.emplace(p.key.hex, jobs.size());
          if (fresh) jobs.push_back({std::move(p), {}, {}, {}});
          auto& users = jobs[it->second].buckets;
          if (std::find(users.begin(), users.end(), b) == users.end()) users.push_back(b);
        }
  }
  return jobs;
}

void run_precompile(KernelBuilder& builder, std::vector<PrecompileJob>& jobs, int threads,
                    const std::function<void(const PrecompileJob&, std::size_t, std::size_t)>& progress) {
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  std::mutex mutex;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < jobs.size();) {
      PrecompileJob& j = jobs[i];
      try {
        j.report = builder.build(j.planned);
      } catch (const std::exception& e) {
        j.error = e.what();
      }
      std::lock_guard lock(mutex);
      ++done;
      if (progress) progress(j, done, jobs.size());
    }
  };
  std::vector<std::thread> pool;
  const int n = std::max(1, std::min<int>(threads > 0 ? threads : int(std::thread::hardware_concurrency()), int(jobs.size())));
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

}  // namespace megamoe
