#include "runtime/bucket_kernels.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/nvshmem_library.hpp"
#include "common/diagnostics.hpp"

namespace megamoe {

namespace {

template <class Args>
Kernel<Args> load(Device& device, KernelBuilder& builder, const TypedSpec<Args>& spec, int min_shared_bytes = 0) {
  Kernel<Args> k;
  const BuildReport report = builder.build(spec);
  if (report.origin == BuildOrigin::compiled)
    progress(fmt::format("compiled {} in {:.1f} s (kernel cache: {})", spec.name(), report.seconds,
                         builder.cache().enabled() ? builder.cache().root().string() : "off"));
  k.built = report.kernel;
  k.module = device.load_module(k.built->binary);
  if (spec.nvshmem) Nvshmem::get().module_init(k.module->handle());  // its NVSHMEM device state, before any launch
  k.function = k.module->function(k.built->symbol);
  k.threads = spec.threads;
  k.shared_bytes = std::max(spec.shared_bytes, min_shared_bytes);
  k.blocks_per_sm = spec.min_blocks;
  k.cluster = std::max(spec.cluster, 1);
  return k;
}

// A path's kernel set loaded, member by member.
template <class Specs>
auto load_set(Device& device, KernelBuilder& builder, const Specs& specs, int min_shared_bytes = 0) {
  typename Specs::template With<Kernel> loaded;
  zip_members(specs, loaded, [&](const auto& spec, auto& kernel) { kernel = load(device, builder, spec, min_shared_bytes); });
  return loaded;
}

}  // namespace

std::unique_ptr<BucketKernels> load_bucket_kernels(Device& device, KernelBuilder& builder, const BucketConfig& bucket,
                                                   const LayerKernels& specs) {
  auto b = std::make_unique<BucketKernels>();
  b->bucket = &bucket;
  b->tiles = specs.tiles;
  if (specs.shared_routes) b->shared_routes = load(device, builder, *specs.shared_routes);
  b->route_count = load(device, builder, specs.route_count);
  b->route = load(device, builder, specs.route);
  std::visit([&](const auto& set) { b->path = load_set(device, builder, set); }, specs.path);
  b->combine = load(device, builder, specs.combine);
  return b;
}

namespace {
// The blocks of `k` that can be resident at once on the whole device, in whole clusters.
unsigned resident(Device& device, const LoadedKernel& k) {
  const int n = device.resident_blocks(k.function, {unsigned(k.threads)}, std::size_t(k.shared_bytes), k.cluster);
  const int planned = k.planned_per_sm() * device.multiprocessors();
  return unsigned(n > 0 ? n : planned) / unsigned(k.cluster) * unsigned(k.cluster);
}
}  // namespace

std::unique_ptr<EpBucketKernels> load_ep_bucket_kernels(Device& device, KernelBuilder& builder,
                                                        const BucketConfig& bucket, const EpLayerKernels& specs,
                                                        int min_shared_bytes) {
  auto b = std::make_unique<EpBucketKernels>();
  const int m = min_shared_bytes;
  b->bucket = &bucket;
  b->tiles = specs.tiles;
  if (specs.shared_routes) b->shared_routes = load(device, builder, *specs.shared_routes, m);
  b->route = load(device, builder, specs.route, m);
  b->dispatch = load(device, builder, specs.dispatch, m);
  b->combine = load(device, builder, specs.combine, m);
  if (specs.node_reduce) b->node_reduce = load(device, builder, *specs.node_reduce, m);
  b->resident_route = resident(device, b->route);
  b->resident_dispatch = resident(device, b->dispatch);
  std::visit(
      [&](const auto& set) {
        auto loaded = load_set(device, builder, set, m);
        b->resident_stage1 = resident(device, loaded.stage1);
        b->path = std::move(loaded);
      },
      specs.path);
  return b;
}

}  // namespace megamoe
