#include "codegen/layer_kernels.hpp"

#include <tuple>

#include "config/path_requirements.hpp"

namespace megamoe {

namespace {
// The specs of a path's kernel set, appended in launch order.
void append_path(std::vector<KernelSpec>& v, const auto& path) {
  std::visit([&](const auto& set) { std::apply([&](const auto&... spec) { (v.push_back(spec), ...); }, set.members()); },
             path);
}
}  // namespace

std::vector<KernelSpec> LayerKernels::all() const {
  std::vector<KernelSpec> v;
  if (shared_routes) v.push_back(*shared_routes);
  v.insert(v.end(), {route_count, route});
  append_path(v, path);
  v.push_back(combine);
  return v;
}

LayerKernels layer_kernels(const Config& config, const BucketConfig& b, KernelPath path) {
  LayerKernels k;
  if (config.model.shared_experts > 0) k.shared_routes = shared_routes_spec();
  k.route_count = route_count_spec();
  k.route = route_spec();
  k.combine = combine_spec(b.combine_wire);
  with_path(path, [&]<class P>(P) {
    k.arithmetic = P::arithmetic(config, b);
    k.tiles = P::tiles(padded_model(P::kPath, config.model), b);
    k.path = P::specs(config, b, k.tiles, k.arithmetic);
  });
  return k;
}

std::vector<KernelSpec> EpLayerKernels::all() const {
  std::vector<KernelSpec> v;
  if (shared_routes) v.push_back(*shared_routes);
  v.push_back(route);
  append_path(v, path);
  v.push_back(dispatch);
  v.push_back(combine);
  if (node_reduce) v.push_back(*node_reduce);
  return v;
}

EpLayerKernels ep_layer_kernels(const Config& config, const BucketConfig& b, KernelPath path, int world, bool nvshmem) {
  EpLayerKernels k;
  if (config.model.shared_experts > 0) k.shared_routes = shared_routes_spec();
  k.route = route_ep_spec(world);
  k.combine = combine_ep_spec(b.combine_wire);
  with_path(path, [&]<class P>(P) {
    k.arithmetic = P::arithmetic(config, b);
    k.tiles = P::tiles(padded_model(P::kPath, config.model), b);
    k.path = P::ep_specs(config, b, k.tiles, k.arithmetic);
    k.dispatch = P::dispatch_ep(config, b, k.arithmetic);
  });
  if (nvshmem) {  // the kernels that put to other nodes: routing, the dispatch, and the nodes' sums
    k.route = with_nvshmem(k.route);
    k.dispatch = with_nvshmem(k.dispatch);
    std::visit([](auto& p) { p.stage1 = with_nvshmem(p.stage1); }, k.path);
    k.node_reduce = node_reduce_ep_spec(b.combine_wire);
    k.combine = combine_ep_spec(b.combine_wire, true);
  }
  return k;
}

std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket, KernelPath path,
                                           int world, bool nvshmem) {
  return world > 1 ? ep_layer_kernels(config, bucket, path, world, nvshmem).all() : layer_kernels(config, bucket, path).all();
}

}  // namespace megamoe
