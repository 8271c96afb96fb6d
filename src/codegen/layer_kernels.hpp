// The kernels a bucket of a config launches on a path, typed by their argument structs: routing
// and combine on every path, and each path's own quantization and stage kernels.
#pragma once
#include <optional>
#include <variant>
#include <vector>

#include "codegen/kernel_specs.hpp"
#include "megamoe/config.hpp"

namespace megamoe {

struct PortableKernels {
  TypedSpec<QuantizeRowsArgs> quantize;
  TypedSpec<Stage1Args> stage1;
  TypedSpec<Stage2Args> stage2;
};

struct TensorCoreKernels {
  TypedSpec<QuantizeRowsArgs> quantize;
  TypedSpec<Stage1Args> stage1;
  TypedSpec<Stage2Args> stage2;
};

struct HopperKernels {
  TypedSpec<DispatchRowsArgs> dispatch;
  TypedSpec<Stage1HopperArgs> stage1;
  TypedSpec<Stage2HopperArgs> stage2;
};

struct LayerKernels {
  std::optional<TypedSpec<SharedRoutesArgs>> shared_routes;  // a model with shared experts: the first launch
  TypedSpec<RouteCountArgs> route_count;
  TypedSpec<RouteArgs> route;
  TypedSpec<CombineArgs> combine;
  std::variant<PortableKernels, TensorCoreKernels, HopperKernels> path;
  int bm1 = 0, bm2 = 0;       // token rows per Stage1 / Stage2 tile
  PathArithmetic arithmetic;  // the scale blocks the kernels were rendered for

  // Every kernel, in launch order.
  std::vector<KernelSpec> all() const;
};

// The kernels of a bucket on a (resolved) path, at the shape the path runs the model (padded_model).
LayerKernels layer_kernels(const Config& config, const BucketConfig& bucket, KernelPath path);

// Over several ranks (docs/ep.md): route_ep with the count exchange, the stages with the protocol
// around them (Stage1 runs the dispatch), combine_ep; and the serial path's dispatch_ep and
// single-GPU Stage1, launched in their place.
struct PortableEpKernels {
  TypedSpec<Stage1EpArgs> stage1;
  TypedSpec<Stage2EpArgs> stage2;
  TypedSpec<Stage1Args> stage1_serial;
};
struct TensorCoreEpKernels {
  TypedSpec<Stage1EpArgs> stage1;
  TypedSpec<Stage2EpArgs> stage2;
  TypedSpec<Stage1Args> stage1_serial;
};
struct HopperEpKernels {
  TypedSpec<Stage1HopperEpArgs> stage1;
  TypedSpec<Stage2HopperEpArgs> stage2;
  TypedSpec<Stage1HopperArgs> stage1_serial;
};
struct EpLayerKernels {
  std::optional<TypedSpec<SharedRoutesArgs>> shared_routes;  // a model with shared experts: the first launch
  TypedSpec<RouteEpArgs> route;
  TypedSpec<DispatchEpArgs> dispatch;  // the serial path
  TypedSpec<CombineEpArgs> combine;
  std::optional<TypedSpec<NodeReduceEpArgs>> node_reduce;  // the nvshmem transport: after Stage2
  std::variant<PortableEpKernels, TensorCoreEpKernels, HopperEpKernels> path;
  int bm1 = 0, bm2 = 0;
  PathArithmetic arithmetic;
  std::vector<KernelSpec> all() const;
};
// world: the group's ranks. nvshmem: for the nvshmem transport (the kernels that put to ranks of other nodes call NVSHMEM,
// with_nvshmem; node_reduce_ep is added and combine takes the nodes' sums).
EpLayerKernels ep_layer_kernels(const Config& config, const BucketConfig& bucket, KernelPath path, int world,
                                bool nvshmem = false);

// Every kernel a bucket launches on a path, as a list: on one GPU (world 1) or as a rank of a
// group of several (world > 1, both the fused and the serial path's; nvshmem: the nvshmem
// transport's). The precompile tool and the tests.
std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket, KernelPath path,
                                           int world = 1, bool nvshmem = false);

}  // namespace megamoe
