// The shape contract: what each kernel path needs of the model's shape and of the GPU, in one
// table. The config schema checks every config against the least of them (the portable path's);
// a path with a larger multiple runs the model's dims padded up to it (zero weight rows and
// columns, x read and y written at the model's width), and the path choice says so.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

// Values per e8m0 scale along K in the MXFP4 format (OCP MX): what any weights must split into.
inline constexpr int kMxBlock = 32;

struct PathRequirements {
  KernelPath path;
  int dim_multiple;             // model_dim and inter_dim: each GEMM's K, and the other's N
  std::string_view dim_reason;  // why that multiple
  std::optional<BackendKind> backend;  // the only backend whose kernels the path has; none: every one
  int min_sm;          // cuda: the lowest compute capability, e.g. 89; 0 for none
  bool needs_sm90a;    // sm_90's architecture-specific instructions (wgmma, bulk copies)
  std::string_view device_reason;
  bool shared_grows_with_k;  // the stage kernels' shared memory holds a row of scales per K / 64
};

// Fastest first: hopper, tensor_core, portable (the order automatic tries them in).
std::span<const PathRequirements> path_table();
const PathRequirements& requirements(KernelPath path);  // a resolved path
// The least any config must meet: the portable path's multiple.
const PathRequirements& least_requirements();

// Dynamic shared memory a block may opt in to on an arch (CUDA's per-architecture limits), or
// a conservative 99 KB for an arch the table does not know.
int shared_memory_limit(BackendKind backend, const std::string& arch);

// Why `path` cannot run on that backend and arch whatever the model: an empty string where it can.
std::string device_refusal(KernelPath path, BackendKind backend, const std::string& arch);
// Why `path` cannot run this config there: the device's refusal, else (tensor-core path) a
// bucket's shared memory past the arch's limit at the padded shape.
std::string path_refusal(KernelPath path, const Config& config, BackendKind backend, const std::string& arch);

// The shape a path's kernels run a model at: model_dim and inter_dim rounded up to the path's
// multiple (the same shape where they are multiples already).
ModelShape padded_model(KernelPath path, const ModelShape& model);
// The config with its model at that shape: what the runtime builds its workspace and kernels from.
Config padded_for_path(Config config, KernelPath path);
// Empty where the path runs the model's own shape; else a line saying which dims are padded, to
// what, why, and the extra GEMM work it costs.
std::string padding_note(KernelPath path, const Config& config);

}  // namespace megamoe
