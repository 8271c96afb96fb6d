#include "runtime/bucket_kernels.hpp"

#include <algorithm>

namespace megamoe {

namespace {

template <class Args>
Kernel<Args> load(Device& device, KernelBuilder& builder, const TypedSpec<Args>& spec) {
  Kernel<Args> k;
  k.built = builder.build(spec).kernel;
  k.module = device.load_module(k.built->binary);
  k.function = k.module->function(k.built->symbol);
  k.threads = spec.threads;
  k.shared_bytes = spec.shared_bytes;
  k.blocks_per_sm = spec.min_blocks;
  k.cluster = std::max(spec.cluster, 1);
  return k;
}

}  // namespace

std::unique_ptr<BucketKernels> load_bucket_kernels(Device& device, KernelBuilder& builder, const BucketConfig& bucket,
                                                   const LayerKernels& specs) {
  auto b = std::make_unique<BucketKernels>();
  b->bucket = &bucket;
  b->bm1 = specs.bm1;
  b->bm2 = specs.bm2;
  b->route_count = load(device, builder, specs.route_count);
  b->route = load(device, builder, specs.route);
  if (auto* p = std::get_if<PortableKernels>(&specs.path)) {
    b->path = PortableLoaded{load(device, builder, p->quantize), load(device, builder, p->stage1),
                             load(device, builder, p->stage2)};
  } else if (auto* t = std::get_if<TensorCoreKernels>(&specs.path)) {
    b->path = TensorCoreLoaded{load(device, builder, t->quantize), load(device, builder, t->stage1),
                               load(device, builder, t->stage2)};
  } else {
    const HopperKernels& h = std::get<HopperKernels>(specs.path);
    HopperLoaded l;
    l.dispatch = load(device, builder, h.dispatch);
    if (h.stages) {
      l.stages = load(device, builder, *h.stages);
      // Stage2's tiles wait for Stage1's on other blocks: every block must be resident at once.
      const int resident = device.resident_blocks(l.stages->function, {unsigned(l.stages->threads)},
                                                  std::size_t(l.stages->shared_bytes), l.stages->cluster);
      const int planned = h.stages->min_blocks * device.multiprocessors();
      l.stages_grid_cap = unsigned(resident > 0 ? std::min(resident, planned) : planned) / 2 * 2;  // whole clusters
    } else {
      l.stage1 = load(device, builder, h.stage1);
      l.stage2 = load(device, builder, h.stage2);
    }
    b->path = std::move(l);
  }
  b->combine = load(device, builder, specs.combine);
  return b;
}

}  // namespace megamoe
