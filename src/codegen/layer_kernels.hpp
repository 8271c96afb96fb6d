// The kernels a bucket of a config launches on a path, typed by their argument structs: routing
// and combine on every path, and the path's own (codegen/path_kernels.hpp).
#pragma once
#include <optional>
#include <vector>

#include "codegen/kernel_specs.hpp"
#include "codegen/path_kernels.hpp"
#include "megamoe/config.hpp"

namespace megamoe {

struct LayerKernels {
  std::optional<TypedSpec<SharedRoutesArgs>> shared_routes;  // a model with shared experts: the first launch
  TypedSpec<RouteCountArgs> route_count;
  TypedSpec<RouteArgs> route;
  TypedSpec<CombineArgs> combine;
  PathKernels<TypedSpec> path;
  PathTiles tiles;
  PathArithmetic arithmetic;  // the scale blocks the kernels were rendered for

  // Every kernel, in launch order.
  std::vector<KernelSpec> all() const;
};

// The kernels of a bucket on a (resolved) path, at the shape the path runs the model (padded_model).
LayerKernels layer_kernels(const Config& config, const BucketConfig& bucket, KernelPath path);

// Over several ranks (docs/ep.md): route_ep with the count exchange, the stages with the protocol
// around them (Stage1 runs the dispatch), combine_ep; and the serial path's dispatch_ep and
// single-GPU Stage1, launched in their place.
struct EpLayerKernels {
  std::optional<TypedSpec<SharedRoutesArgs>> shared_routes;  // a model with shared experts: the first launch
  TypedSpec<RouteEpArgs> route;
  TypedSpec<DispatchEpArgs> dispatch;  // the serial path
  TypedSpec<CombineEpArgs> combine;
  std::optional<TypedSpec<NodeReduceEpArgs>> node_reduce;  // the nvshmem transport: after Stage2
  EpPathKernels<TypedSpec> path;
  PathTiles tiles;
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
