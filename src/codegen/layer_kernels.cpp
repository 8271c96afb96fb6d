#include "codegen/layer_kernels.hpp"

#include "codegen/kernel_paths.hpp"
#include "config/path_requirements.hpp"
#include "config/tile_sizes.hpp"

namespace megamoe {

std::vector<KernelSpec> LayerKernels::all() const {
  std::vector<KernelSpec> v;
  if (shared_routes) v.push_back(*shared_routes);
  v.insert(v.end(), {route_count, route});
  if (auto* p = std::get_if<PortableKernels>(&path)) v.insert(v.end(), {p->quantize, p->stage1, p->stage2});
  if (auto* t = std::get_if<TensorCoreKernels>(&path)) v.insert(v.end(), {t->quantize, t->stage1, t->stage2});
  if (auto* h = std::get_if<HopperKernels>(&path)) v.insert(v.end(), {h->dispatch, h->stage1, h->stage2});
  v.push_back(combine);
  return v;
}

LayerKernels layer_kernels(const Config& config, const BucketConfig& b, KernelPath path) {
  LayerKernels k;
  const ModelShape m = padded_model(path, config.model);  // the shape the path's kernels run
  k.arithmetic = path_arithmetic(path, config, b);
  if (config.model.shared_experts > 0) k.shared_routes = shared_routes_spec();
  k.route_count = route_count_spec();
  k.route = route_spec();
  k.combine = combine_spec(b.combine_wire);
  if (path == KernelPath::hopper) {
    k.bm1 = hopper_bm(b, 1), k.bm2 = hopper_bm(b, 2);
    HopperKernels h;
    const HopperScales scales = hopper_scales(config, b);
    h.dispatch = dispatch_rows_spec(scales.x_block, b.bounds_check);
    h.stage1 = stage1_hopper_spec(config.activation, k.bm1, scales, b.bounds_check, false, b.weights,
                                  hopper_groups(b.stage1));
    h.stage2 = stage2_hopper_spec(k.bm2, b.combine_wire, scales, b.bounds_check, false, b.weights,
                                  hopper_groups(b.stage2));
    k.path = std::move(h);
  } else if (path == KernelPath::tensor_core) {
    k.bm1 = tensor_core_bm(b.stage1.token_tile), k.bm2 = tensor_core_bm(b.stage2.token_tile);
    k.path = TensorCoreKernels{quantize_rows_spec(k.arithmetic.x),
                               stage1_tensor_core_spec(config.activation, k.bm1, m.model_dim, b.bounds_check),
                               stage2_tensor_core_spec(k.bm2, m.inter_dim, b.combine_wire, b.bounds_check)};
  } else {
    k.bm1 = portable_bm(b.stage1.token_tile), k.bm2 = portable_bm(b.stage2.token_tile);
    k.path = PortableKernels{quantize_rows_spec(k.arithmetic.x),
                             stage1_portable_spec(config.activation, k.bm1, b.bounds_check),
                             stage2_portable_spec(k.bm2, b.combine_wire, b.bounds_check)};
  }
  return k;
}

std::vector<KernelSpec> EpLayerKernels::all() const {
  std::vector<KernelSpec> v;
  if (shared_routes) v.push_back(*shared_routes);
  v.push_back(route);
  if (auto* p = std::get_if<PortableEpKernels>(&path)) v.insert(v.end(), {p->stage1, p->stage2, p->stage1_serial});
  if (auto* t = std::get_if<TensorCoreEpKernels>(&path)) v.insert(v.end(), {t->stage1, t->stage2, t->stage1_serial});
  if (auto* h = std::get_if<HopperEpKernels>(&path)) v.insert(v.end(), {h->stage1, h->stage2, h->stage1_serial});
  v.push_back(dispatch);
  v.push_back(combine);
  if (node_reduce) v.push_back(*node_reduce);
  return v;
}

EpLayerKernels ep_layer_kernels(const Config& config, const BucketConfig& b, KernelPath path, int world, bool nvshmem) {
  EpLayerKernels k;
  const ModelShape m = padded_model(path, config.model);  // the shape the path's kernels run
  k.arithmetic = path_arithmetic(path, config, b);
  if (config.model.shared_experts > 0) k.shared_routes = shared_routes_spec();
  k.route = route_ep_spec(world);
  k.combine = combine_ep_spec(b.combine_wire);
  if (path == KernelPath::hopper) {
    const HopperScales scales = hopper_scales(config, b);
    k.dispatch = dispatch_ep_spec(scales.x_block, true, b.bounds_check);
    k.bm1 = hopper_bm(b, 1), k.bm2 = hopper_bm(b, 2);
    k.path = HopperEpKernels{
        stage1_hopper_ep_spec(config.activation, k.bm1, scales, b.bounds_check, b.weights, hopper_groups(b.stage1)),
        stage2_hopper_ep_spec(k.bm2, b.combine_wire, scales, b.bounds_check, b.weights, hopper_groups(b.stage2)),
        stage1_hopper_spec(config.activation, k.bm1, scales, b.bounds_check, false, b.weights,
                           hopper_groups(b.stage1))};
  } else if (path == KernelPath::tensor_core) {
    k.dispatch = dispatch_ep_spec(k.arithmetic.x, false, b.bounds_check);
    k.bm1 = tensor_core_bm(b.stage1.token_tile), k.bm2 = tensor_core_bm(b.stage2.token_tile);
    k.path = TensorCoreEpKernels{
        stage1_tensor_core_ep_spec(config.activation, k.bm1, m.model_dim, b.bounds_check),
        stage2_tensor_core_ep_spec(k.bm2, m.inter_dim, b.combine_wire, b.bounds_check),
        stage1_tensor_core_spec(config.activation, k.bm1, m.model_dim, b.bounds_check)};
  } else {
    k.dispatch = dispatch_ep_spec(k.arithmetic.x, false, b.bounds_check);
    k.bm1 = portable_bm(b.stage1.token_tile), k.bm2 = portable_bm(b.stage2.token_tile);
    k.path = PortableEpKernels{stage1_portable_ep_spec(config.activation, k.bm1, b.bounds_check),
                               stage2_portable_ep_spec(k.bm2, b.combine_wire, b.bounds_check),
                               stage1_portable_spec(config.activation, k.bm1, b.bounds_check)};
  }
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
