// The run-time entry point: created from a config name, it picks the bucket for a call's token
// count, gets that bucket's kernels from the cache (compiling on a miss), loads and launches them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

struct RuntimeOptions {
  BackendKind backend = BackendKind::cuda;
  int device = 0;
};

class Runtime {
 public:
  // Throws ConfigError for a bad config, NoGpuError where there is no GPU.
  static std::unique_ptr<Runtime> create(std::string_view config_name, RuntimeOptions options = {});
  ~Runtime();

  const Config& config() const { return config_; }
  Device& device() { return *device_; }

  // Builds and loads the kernels of the bucket of `tokens` now rather than at the first call.
  void prepare(std::int64_t tokens);

  // The tile-wise activation: out[t, c] = act(gate_up[t, c], gate_up[t, I + c]) for t < tokens,
  // c < I = model.inter_dim, fp32, on `stream`. The checked build (bounds_check) refuses
  // tokens > row_capacity and sets *error to 1; the unchecked one trusts the caller.
  // (The generator's end-to-end workload until the MoE layer lands.)
  void activation(const float* gate_up, float* out, std::int64_t tokens, int row_capacity, int* error,
                  StreamHandle stream = nullptr);

 private:
  struct LoadedKernel;
  Runtime(Config config, std::unique_ptr<Device> device);
  const LoadedKernel& kernels_for(std::int64_t tokens);

  Config config_;
  std::unique_ptr<Device> device_;
  std::map<int, std::unique_ptr<LoadedKernel>> loaded_;  // by bucket
};

}  // namespace megamoe
