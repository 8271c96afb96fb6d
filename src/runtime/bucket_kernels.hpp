// A bucket's kernels loaded on the device, each typed by its argument struct as its spec was
// (codegen/layer_kernels.hpp), so that a launch can only pass the struct the kernel takes.
#pragma once
#include <memory>
#include <optional>
#include <variant>

#include "codegen/layer_kernels.hpp"
#include "jit/kernel_builder.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

struct LoadedKernel {
  std::shared_ptr<const BuiltKernel> built;
  std::unique_ptr<Module> module;
  void* function = nullptr;
  int threads = 0;
  int shared_bytes = 0;
  int blocks_per_sm = 0;  // the launch bound's (0: none given)
  int cluster = 1;        // blocks per cluster: the grid is a multiple of it

  // Blocks per SM a persistent grid of this kernel plans for: the launch bound's, else 2.
  int planned_per_sm() const { return blocks_per_sm > 0 ? blocks_per_sm : 2; }
};

template <class Args>
struct Kernel : LoadedKernel {};

struct BucketKernels {
  const BucketConfig* bucket = nullptr;
  PathTiles tiles;
  std::optional<Kernel<SharedRoutesArgs>> shared_routes;  // a model with shared experts
  Kernel<RouteCountArgs> route_count;
  Kernel<RouteArgs> route;
  Kernel<CombineArgs> combine;
  PathKernels<Kernel> path;  // the path's own (codegen/path_kernels.hpp)
};

// Builds (through the cache) and loads every kernel of `specs`.
std::unique_ptr<BucketKernels> load_bucket_kernels(Device& device, KernelBuilder& builder, const BucketConfig& bucket,
                                                   const LayerKernels& specs);

// A bucket's kernels over several ranks. The kernels whose blocks wait for each other (route_ep's
// grid barrier, the dispatch's senders and receivers, Stage1's tiles and the dispatch) launch no
// more blocks than can be resident at once: resident_* hold those numbers.
struct EpBucketKernels {
  const BucketConfig* bucket = nullptr;
  PathTiles tiles;
  std::optional<Kernel<SharedRoutesArgs>> shared_routes;  // a model with shared experts
  Kernel<RouteEpArgs> route;
  Kernel<DispatchEpArgs> dispatch;
  Kernel<CombineEpArgs> combine;
  std::optional<Kernel<NodeReduceEpArgs>> node_reduce;  // the nvshmem transport
  EpPathKernels<Kernel> path;
  unsigned resident_route = 0, resident_dispatch = 0, resident_stage1 = 0;
};

// min_shared_bytes: the dynamic shared memory every kernel is launched with at least (loopback
// ranks: enough that no two blocks share an SM, docs/ep.md).
std::unique_ptr<EpBucketKernels> load_ep_bucket_kernels(Device& device, KernelBuilder& builder,
                                                        const BucketConfig& bucket, const EpLayerKernels& specs,
                                                        int min_shared_bytes);

}  // namespace megamoe
