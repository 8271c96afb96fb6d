// The run-time entry point: created from a config name, it picks the bucket for a call's token
// count, gets that bucket's kernels from the cache (compiling on a miss), loads and launches them.
// One GPU (world size 1): every expert of the config is local.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/weights.hpp"

namespace megamoe {

struct Workspace;      // src/runtime/workspace.hpp
struct BucketKernels;  // src/runtime/bucket_kernels.hpp

struct RuntimeOptions {
  BackendKind backend = BackendKind::cuda;
  int device = 0;
  int max_tokens = 8192;  // the most tokens one call may pass (sizes the workspace)
  bool profile = false;   // record events between the stages (see last_stage_times)
  KernelPath path = KernelPath::automatic;  // the expert-GEMM kernels (config.hpp)
};

// Expert weights on the device, in the layout the runtime's kernels read (docs/layer.md):
// v1 (checkpoint layout) for the portable path, v3 for the tensor-core and Hopper paths.
class PreparedWeights {
 public:
  KernelPath path = KernelPath::portable;
  int experts = 0, model_dim = 0, inter_dim = 0;
  DeviceBuffer w1_packed, w1_scales, w2_packed, w2_scales;                 // v1
  DeviceBuffer w1_units, w1_row_scale, w2_units, w2_row_scale;  // v3
  std::size_t flushed_blocks = 0;  // v3: MX blocks too far below their row's largest, zeroed
};

// With a bucket's fused_stages (Hopper) both stages run as one kernel: stage1_ms holds it and
// stage2_ms is about 0.
struct StageTimes {
  float route_ms = 0, quantize_ms = 0, stage1_ms = 0, stage2_ms = 0, combine_ms = 0, total_ms = 0;
};

// What the kernels found wrong in the calls since the last take_errors().
struct CallErrors {
  long long bad_ids = 0;            // ids outside [-1, experts): skipped
  long long first_bad_slot = -1;    // t * topk + k of the first of them, in the call that had it
  long long bounds_violations = 0;  // only counted by the checked build (bounds_check)
  bool any() const { return bad_ids || bounds_violations; }
};

class Runtime {
 public:
  // Throws ConfigError for a bad config, NoGpuError where there is no GPU.
  static std::unique_ptr<Runtime> create(std::string_view config_name, RuntimeOptions options = {});
  ~Runtime();

  const Config& config() const { return config_; }
  const RuntimeOptions& options() const { return options_; }
  KernelPath path() const { return path_; }  // resolved: portable, tensor_core or hopper
  PathArithmetic arithmetic() const;  // how this runtime's path rounds and sums (for the references)
  Device& device() { return *device_; }

  // Checks the weights' shape against the config and uploads them in the kernels' layout.
  std::unique_ptr<PreparedWeights> prepare_weights(const Mxfp4ExpertWeights& weights);

  // Builds and loads the kernels of the bucket of `tokens` now rather than at the first call.
  void prepare(std::int64_t tokens);

  // y[t] = sum_k weights[t,k] * FFN_{ids[t,k]}(x[t]) for t < tokens, on `stream`. Device pointers:
  // x and y bf16 [tokens][model_dim], 16-byte aligned; ids int32 and weights fp32 [tokens][topk].
  // An id of -1 is an empty slot; other ids outside [0, experts) are skipped and reported by
  // take_errors().
  // Throws megamoe::Error for tokens outside [0, max_tokens], x or y not 16-byte aligned, a null
  // pointer where tokens > 0, or weights of another shape.
  // Launches only: no host sync and no allocation once the bucket's kernels are loaded, so calls
  // can go back to back and be captured in a graph (call prepare() first; the GPU tests replay a
  // captured call on new inputs). The workspace is the runtime's own: one Runtime serves one
  // stream at a time.
  void forward(const PreparedWeights& weights, const void* x, const int* ids, const float* route_weights, void* y,
               std::int64_t tokens, StreamHandle stream = nullptr);

  // Turns the recording of stage events on or off for later calls (off while capturing a graph).
  void set_profile(bool on) { options_.profile = on; }

  // With options.profile: the stage times of the last forward() (waits for it).
  StageTimes last_stage_times();

  // Waits for the device, returns the errors gathered since the last call, and clears them.
  CallErrors take_errors();

 private:
  Runtime(Config config, RuntimeOptions options, std::unique_ptr<Device> device);
  const BucketKernels& kernels_for(std::int64_t tokens);

  Config config_;
  RuntimeOptions options_;
  std::unique_ptr<Device> device_;
  KernelPath path_ = KernelPath::portable;
  std::unique_ptr<Workspace> workspace_;
  std::map<int, std::unique_ptr<BucketKernels>> loaded_;  // by bucket
  EventHandle stage_events_[6] = {};  // the stage boundaries of the last call (StageTimes): 6 events
};

}  // namespace megamoe
