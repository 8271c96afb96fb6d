#include "megamoe/runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "codegen/kernel_catalog.hpp"
#include "jit/kernel_builder.hpp"
#include "weights/tensor_core_layout.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

namespace {
constexpr int kErrorWords = 4;  // templates/moe/route.cuh: kErrWords
constexpr int kNoBadSlot = 0x7fffffff;
}  // namespace

struct Runtime::LoadedKernel {
  std::shared_ptr<const BuiltKernel> built;
  std::unique_ptr<Module> module;
  void* function = nullptr;
  int shared_bytes = 0;
  int blocks_per_sm = 0;  // the launch bound's (0: none given)
  int cluster = 1;        // blocks per cluster: the grid is a multiple of it
};

struct Runtime::BucketKernels {
  const BucketConfig* bucket = nullptr;
  int bm1 = 0, bm2 = 0;
  LoadedKernel route_count, route, quantize, stage1, stage2, combine;
  LoadedKernel stages;  // both stages in one kernel (a bucket's fused_stages), launched instead
  bool fused = false;
  unsigned stages_grid_cap = 0;  // the blocks of `stages` that can be resident at once
};

// Device buffers sized for max_tokens (docs/layer.md, Workspace, lists them).
struct Runtime::Workspace {
  DeviceBuffer route_counts, expert_offsets, tile_offsets1, tile_offsets2, row_token, row_slot, row_weight,
      slot_row, x_q, x_scales, h_q, h_scales, wire, wire_scales, errors,
      expert_done;  // the fused stages' count of Stage1 tiles stored, by expert
  int rows_pad = 0;  // the routed layout's rows per chunk (Hopper): every routed row and a last tile's overhang
};

Runtime::Runtime(Config config, RuntimeOptions options, std::unique_ptr<Device> device)
    : config_(std::move(config)), options_(options), device_(std::move(device)) {
  path_ = resolve_path(options_.path, config_.model, device_->kind(), device_->arch());
  if (options_.max_tokens < 1 || options_.max_tokens > kMaxBucket)
    throw Error(fmt::format("megamoe: RuntimeOptions.max_tokens = {}, expected 1..{}", options_.max_tokens, kMaxBucket));
  const std::size_t T = options_.max_tokens, K = config_.model.topk, E = config_.model.experts_per_rank,
                    D = config_.model.model_dim, I = config_.model.inter_dim, R = T * K;
  Device& d = *device_;
  ws_ = std::make_unique<Workspace>();
  ws_->route_counts = DeviceBuffer(d, std::size_t(route_blocks((long long)R)) * E * 4);
  ws_->expert_offsets = DeviceBuffer(d, (E + 1) * 4);
  ws_->tile_offsets1 = DeviceBuffer(d, (E + 1) * 4);
  ws_->tile_offsets2 = DeviceBuffer(d, (E + 1) * 4);
  ws_->row_token = DeviceBuffer(d, R * 4);
  ws_->row_slot = DeviceBuffer(d, R * 4);
  ws_->slot_row = DeviceBuffer(d, R * 4);
  ws_->row_weight = DeviceBuffer(d, R * 4);
  // x and h: by token (x) or routed row (h) with e8m0 scales per 32 or 64 values, or on the Hopper
  // path both in the routed layout (templates/moe/routed_rows.cuh) with f32 scales per 128 (16
  // bytes per row and 128 values).
  ws_->rows_pad = int(R) + kMaxTokenTile;
  const std::size_t xr = path_ == KernelPath::hopper ? std::size_t(ws_->rows_pad) : T;
  const std::size_t hr = path_ == KernelPath::hopper ? std::size_t(ws_->rows_pad) : R;
  ws_->x_q = DeviceBuffer(d, xr * D);
  ws_->x_scales = DeviceBuffer(d, xr * D / 8);
  ws_->h_q = DeviceBuffer(d, hr * I);
  ws_->h_scales = DeviceBuffer(d, hr * I / 8);
  ws_->wire = DeviceBuffer(d, R * D * 2);  // bf16, or fp8 in its first half
  ws_->wire_scales = DeviceBuffer(d, R * D / 32);
  ws_->errors = DeviceBuffer(d, kErrorWords * 4);
  ws_->expert_done = DeviceBuffer(d, E * 4);  // zeroed by dispatch in each call that uses it
  int init[kErrorWords] = {0, kNoBadSlot, 0, 0};
  d.copy_to_device(ws_->errors.get(), init, sizeof init);
  for (auto& e : events_) e = d.create_event();
}

Runtime::~Runtime() {
  for (auto& e : events_)
    if (e) device_->destroy_event(e);
}

std::unique_ptr<Runtime> Runtime::create(std::string_view config_name, RuntimeOptions options) {
  Config config = load_config(config_name);
  return std::unique_ptr<Runtime>(
      new Runtime(std::move(config), options, open_device(options.backend, options.device)));
}

std::unique_ptr<PreparedWeights> Runtime::prepare_weights(const Mxfp4ExpertWeights& w) {
  w.check();
  const ModelShape& m = config_.model;
  auto expect = [&](const char* field, int got, int want, const char* config_field) {
    if (got != want)
      throw Error(fmt::format("megamoe: weights.{} = {}, expected {} (config {} model.{})", field, got, want,
                              config_.name, config_field));
  };
  expect("experts", w.experts, m.experts_per_rank, "experts_per_rank");
  expect("model_dim", w.model_dim, m.model_dim, "model_dim");
  expect("inter_dim", w.inter_dim, m.inter_dim, "inter_dim");
  auto p = std::make_unique<PreparedWeights>();
  p->path = path_;
  p->experts = w.experts, p->model_dim = w.model_dim, p->inter_dim = w.inter_dim;
  auto upload = [&](const auto& host) {
    std::size_t bytes = host.size() * sizeof(host[0]);
    DeviceBuffer b(*device_, bytes);
    device_->copy_to_device(b.get(), host.data(), bytes);
    return b;
  };
  if (path_ == KernelPath::portable) {  // layout v1: the checkpoint layout itself
    p->w1_packed = upload(w.w1_packed);
    p->w1_scales = upload(w.w1_scales);
    p->w2_packed = upload(w.w2_packed);
    p->w2_scales = upload(w.w2_scales);
    return p;
  }
  TensorCoreWeights w1 = to_tensor_core_layout(w.w1_packed.data(), w.w1_scales.data(), w.experts, 2 * w.inter_dim,
                                               w.model_dim, true);
  p->w1_units = upload(w1.units), p->w1_row_scale = upload(w1.row_scale);
  w1 = {};
  TensorCoreWeights w2 = to_tensor_core_layout(w.w2_packed.data(), w.w2_scales.data(), w.experts, w.model_dim,
                                               w.inter_dim, false);
  p->w2_units = upload(w2.units), p->w2_row_scale = upload(w2.row_scale);
  p->flushed_blocks = w1.flushed_blocks + w2.flushed_blocks;
  return p;
}

const Runtime::BucketKernels& Runtime::kernels_for(std::int64_t tokens) {
  const BucketConfig& bucket = config_.bucket_for_tokens(tokens);
  auto& slot = loaded_[bucket.bucket];
  if (!slot) {
    KernelBuilder& builder = shared_kernel_builder(device_->kind(), device_->arch());
    LayerKernels specs = layer_kernels(config_, bucket, path_);
    auto load = [&](const KernelSpec& spec) {
      LoadedKernel k;
      k.built = builder.build(spec).kernel;
      k.module = device_->load_module(k.built->binary);
      k.function = k.module->function(k.built->symbol);
      k.shared_bytes = spec.shared_bytes;
      k.blocks_per_sm = spec.min_blocks;
      k.cluster = std::max(spec.cluster, 1);
      return k;
    };
    auto b = std::make_unique<BucketKernels>();
    b->bucket = &bucket;
    b->bm1 = specs.bm1;
    b->bm2 = specs.bm2;
    b->route_count = load(specs.route_count);
    b->route = load(specs.route);
    b->quantize = load(specs.quantize);
    b->fused = specs.fused;
    if (specs.fused) {
      b->stages = load(specs.stages);
      // Stage2's tiles wait for Stage1's on other blocks: every block must be resident at once.
      const int resident = device_->resident_blocks(b->stages.function, {unsigned(specs.stages.threads)},
                                                    std::size_t(specs.stages.shared_bytes), b->stages.cluster);
      const int planned = specs.stages.min_blocks * device_->multiprocessors();
      b->stages_grid_cap = unsigned(resident > 0 ? std::min(resident, planned) : planned) / 2 * 2;  // whole clusters
    } else {
      b->stage1 = load(specs.stage1);
      b->stage2 = load(specs.stage2);
    }
    b->combine = load(specs.combine);
    slot = std::move(b);
  }
  return *slot;
}

void Runtime::prepare(std::int64_t tokens) { kernels_for(tokens); }

PathArithmetic Runtime::arithmetic() const { return path_arithmetic(path_, config_.model); }

void Runtime::forward(const PreparedWeights& w, const void* x, const int* ids, const float* route_weights, void* y,
                      std::int64_t tokens, StreamHandle stream) {
  if (tokens < 0 || tokens > options_.max_tokens)
    throw Error(fmt::format("megamoe: forward: tokens = {}, expected 0..{} (RuntimeOptions.max_tokens)", tokens,
                            options_.max_tokens));
  const ModelShape& m = config_.model;
  if (w.path != path_)
    throw Error(fmt::format("megamoe: forward: weights were prepared for the {} path, this runtime runs {}",
                            to_string(w.path), to_string(path_)));
  if (w.experts != m.experts_per_rank || w.model_dim != m.model_dim || w.inter_dim != m.inter_dim)
    throw Error(fmt::format("megamoe: forward: weights are {} experts x {} x {}, the config wants {} x {} x {}",
                            w.experts, w.model_dim, w.inter_dim, m.experts_per_rank, m.model_dim, m.inter_dim));
  for (auto [name, ptr] : {std::pair<const char*, const void*>{"x", x}, {"y", y}})
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16)
      throw Error(fmt::format("megamoe: forward: {} = {}, expected a 16-byte aligned address (rows are read and "
                              "written 16 bytes at a time)",
                              name, ptr));
  if (tokens == 0) return;
  for (auto [name, ptr] : {std::pair<const char*, const void*>{"x", x}, {"ids", ids}, {"weights", route_weights},
                           {"y", y}})
    if (ptr == nullptr)
      throw Error(
          fmt::format("megamoe: forward: {} is null with tokens = {}, expected a device pointer", name, tokens));
  const BucketKernels& k = kernels_for(tokens);
  Device& d = *device_;
  int T = int(tokens), K = m.topk, E = m.experts_per_rank, D = m.model_dim, I = m.inter_dim;
  int rows_capacity = options_.max_tokens * K, slots = T * K;
  const int sms = d.multiprocessors();
  auto mark = [&](int i) {
    if (options_.profile) d.record(events_[i], stream);
  };
  // early: may start while the previous kernel finishes (Device::launch's early_start); the
  // kernels launched so wait for it in mm_wait_prior_grid() before they touch memory. The call's
  // first launch is one too: after our own combine (a burst of calls) it is scheduled while that
  // finishes, and after any other kernel its wait is an ordinary stream order.
  auto launch = [&](const LoadedKernel& kernel, unsigned grid, std::vector<void*> args, bool early = false) {
    d.launch(kernel.function, {grid}, {unsigned(kernel.built->threads)}, std::size_t(kernel.shared_bytes), stream,
             args.data(), early);
  };
  const bool hopper = path_ == KernelPath::hopper;  // its stage kernels wait in the producer
  void *counts = nullptr, *eo = ws_->expert_offsets.get(), *to1 = ws_->tile_offsets1.get(),
       *to2 = ws_->tile_offsets2.get(), *rt = ws_->row_token.get(), *rs = ws_->row_slot.get(), *sr = ws_->slot_row.get(),
       *rw = ws_->row_weight.get(), *xq = ws_->x_q.get(), *xs = ws_->x_scales.get(), *hq = ws_->h_q.get(),
       *hs = ws_->h_scales.get(), *wire = ws_->wire.get(), *wsc = ws_->wire_scales.get(), *err = ws_->errors.get();
  int bm1 = k.bm1, bm2 = k.bm2;

  // Persistent grids: at most blocks_per_sm blocks per SM walk the tiles routing laid out, in
  // whole clusters (the tile count is a multiple of the cluster: col_tiles is).
  auto tile_grid = [&](int bm, int col_tiles, int blocks_per_sm, int cluster = 1) {
    long long row_tiles = (slots + bm - 1) / bm + E;  // each expert adds at most one partial tile
    long long g = std::min<long long>(row_tiles * col_tiles, (long long)blocks_per_sm * sms);
    return unsigned(std::max<long long>(g / cluster * cluster, cluster));
  };
  mark(0);
  const unsigned route_grid = unsigned(route_blocks(slots));
  if (route_grid > 1) {  // per-block counts first; one block counts for itself
    counts = ws_->route_counts.get();
    launch(k.route_count, route_grid, {&ids, &T, &K, &E, &counts, &err}, true);
  }
  launch(k.route, route_grid,
         {&ids, &route_weights, &T, &K, &E, &bm1, &bm2, &counts, &eo, &to1, &to2, &rt, &rs, &rw, &sr, &err}, true);
  mark(1);
  int rows_pad = ws_->rows_pad;
  void* done = k.fused ? ws_->expert_done.get() : nullptr;
  if (hopper) {  // one warp per token and 4 x 128 values
    long long tasks = (long long)T * ((D / 128 + 3) / 4);
    launch(k.quantize, unsigned(std::min<long long>((tasks + 7) / 8, 16LL * sms)),
           {&x, &ids, &sr, &eo, &T, &K, &E, &D, &rows_pad, &rows_capacity, &xq, &xs, &done, &err}, true);
  } else {
    long long qblocks = (long long)T * D / 32;
    launch(k.quantize, unsigned(std::min<long long>((qblocks + 7) / 8, 16LL * sms)), {&x, &T, &D, &xq, &xs});
  }
  mark(2);
  // Layout v3 (tensor_core and hopper; null on the portable path).
  const void *w1u = w.w1_units.get(), *w1r = w.w1_row_scale.get(), *w2u = w.w2_units.get(),
             *w2r = w.w2_row_scale.get();
  auto per_sm = [](const LoadedKernel& s) { return s.blocks_per_sm > 0 ? s.blocks_per_sm : 2; };
  if (k.fused) {  // Hopper, both stages in one kernel: its time is reported as Stage1's
    const unsigned grid = std::min(
        tile_grid(bm1, (2 * I + D) / kTensorCoreWeightRows, per_sm(k.stages), k.stages.cluster), k.stages_grid_cap);
    launch(k.stages, grid,
           {&xq, &xs, &eo, &to1, &to2, &rt, &rs, &rw, &w1u, &w1r, &w2u, &w2r, &E, &D, &I, &hq, &hs, &wire, &wsc, &done,
            &rows_pad, &rows_capacity, &T, &slots, &err},
           true);
    mark(3);
  } else if (path_ != KernelPath::portable) {  // tensor_core and hopper: layout v3, one argument list
    std::vector<void*> a1 = {&xq, &xs, &eo, &to1, &rt, &w1u, &w1r, &E, &D, &I, &hq, &hs, &rows_capacity, &T, &err};
    std::vector<void*> a2 = {&hq, &hs, &eo,  &to2, &rs,  &rw,           &w2u,   &w2r,
                             &E,  &D,  &I,   &wire, &wsc, &rows_capacity, &slots, &err};
    if (path_ == KernelPath::hopper) {  // rows_pad before rows_capacity
      a1.insert(a1.end() - 3, &rows_pad);
      a2.insert(a2.end() - 3, &rows_pad);
    }
    launch(k.stage1, tile_grid(bm1, 2 * I / kTensorCoreWeightRows, per_sm(k.stage1), k.stage1.cluster), a1, hopper);
    mark(3);
    launch(k.stage2, tile_grid(bm2, D / kTensorCoreWeightRows, per_sm(k.stage2)), a2, hopper);
  } else {
    const void *w1p = w.w1_packed.get(), *w1s = w.w1_scales.get(), *w2p = w.w2_packed.get(),
               *w2s = w.w2_scales.get();
    launch(k.stage1, tile_grid(bm1, I / kPortableBn, 8),
           {&xq, &xs, &eo, &to1, &rt, &w1p, &w1s, &E, &D, &I, &hq, &hs, &rows_capacity, &T, &err});
    mark(3);
    launch(k.stage2, tile_grid(bm2, D / kPortableBn, 8),
           {&hq, &hs, &eo, &to2, &rs, &rw, &w2p, &w2s, &E, &D, &I, &wire, &wsc, &rows_capacity, &slots, &err});
  }
  mark(4);
  long long combine_tasks = (long long)T * (D / 8);  // templates/moe/combine.cuh: a thread per 8 columns
  launch(k.combine, unsigned(std::min<long long>((combine_tasks + 255) / 256, 16LL * sms)),
         {&ids, &T, &K, &E, &D, &wire, &wsc, &y}, true);
  mark(5);
}

StageTimes Runtime::last_stage_times() {
  if (!options_.profile) throw Error("megamoe: last_stage_times() needs RuntimeOptions.profile = true");
  Device& d = *device_;
  d.synchronize(nullptr);
  StageTimes t;
  t.route_ms = d.elapsed_ms(events_[0], events_[1]);
  t.quantize_ms = d.elapsed_ms(events_[1], events_[2]);
  t.stage1_ms = d.elapsed_ms(events_[2], events_[3]);
  t.stage2_ms = d.elapsed_ms(events_[3], events_[4]);
  t.combine_ms = d.elapsed_ms(events_[4], events_[5]);
  t.total_ms = d.elapsed_ms(events_[0], events_[5]);
  return t;
}

CallErrors Runtime::take_errors() {
  Device& d = *device_;
  d.synchronize(nullptr);
  int words[kErrorWords];
  d.copy_to_host(words, ws_->errors.get(), sizeof words);
  int init[kErrorWords] = {0, kNoBadSlot, 0, 0};
  d.copy_to_device(ws_->errors.get(), init, sizeof init);
  CallErrors e;
  e.bad_ids = words[0];
  e.first_bad_slot = words[1] == kNoBadSlot ? -1 : words[1];
  e.bounds_violations = words[2];
  return e;
}

}  // namespace megamoe
