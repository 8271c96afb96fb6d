// Runtime: creation, weight preparation, the bucket's kernels, and forward(): its arguments
// checked, then the call's launches (runtime/layer_launch.hpp).
#include "megamoe/runtime.hpp"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "runtime/layer_launch.hpp"
#include "weights/tensor_core_layout.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

Runtime::Runtime(Config config, RuntimeOptions options, std::unique_ptr<Device> device)
    : config_(std::move(config)), options_(options), device_(std::move(device)) {
  path_ = resolve_path(options_.path, config_.model, device_->kind(), device_->arch());
  if (options_.max_tokens < 1 || options_.max_tokens > kMaxBucket)
    throw Error(fmt::format("megamoe: RuntimeOptions.max_tokens = {}, expected 1..{}", options_.max_tokens, kMaxBucket));
  workspace_ = std::make_unique<Workspace>(Workspace::create(*device_, config_, options_, path_));
  for (auto& e : stage_events_) e = device_->create_event();
}

Runtime::~Runtime() {
  for (auto& e : stage_events_)
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

const BucketKernels& Runtime::kernels_for(std::int64_t tokens) {
  const BucketConfig& bucket = config_.bucket_for_tokens(tokens);
  auto& slot = loaded_[bucket.bucket];
  if (!slot)
    slot = load_bucket_kernels(*device_, shared_kernel_builder(device_->kind(), device_->arch()), bucket,
                               layer_kernels(config_, bucket, path_));
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
  const BucketKernels& kernels = kernels_for(tokens);
  const LayerCall call{*device_, stream, options_.profile ? stage_events_ : nullptr, m, kernels, *workspace_, w,
                       x, ids, route_weights, y, int(tokens)};
  call.mark(0);
  launch_route(call);
  call.mark(1);
  std::visit(
      [&](const auto& path_kernels) {
        using K = std::decay_t<decltype(path_kernels)>;
        if constexpr (std::is_same_v<K, PortableLoaded>) launch_stages_portable(call, path_kernels);
        else if constexpr (std::is_same_v<K, TensorCoreLoaded>) launch_stages_tensor_core(call, path_kernels);
        else launch_stages_hopper(call, path_kernels);
      },
      kernels.path);
  call.mark(4);
  launch_combine(call);
  call.mark(5);
}

StageTimes Runtime::last_stage_times() {
  if (!options_.profile) throw Error("megamoe: last_stage_times() needs RuntimeOptions.profile = true");
  Device& d = *device_;
  d.synchronize(nullptr);
  auto ms = [&](int from, int to) { return d.elapsed_ms(stage_events_[from], stage_events_[to]); };
  StageTimes t;
  t.route_ms = ms(0, 1);
  t.quantize_ms = ms(1, 2);
  t.stage1_ms = ms(2, 3);
  t.stage2_ms = ms(3, 4);
  t.combine_ms = ms(4, 5);
  t.total_ms = ms(0, 5);
  return t;
}

CallErrors Runtime::take_errors() {
  Device& d = *device_;
  d.synchronize(nullptr);
  int words[kErrWords];
  d.copy_to_host(words, workspace_->errors.get(), sizeof words);
  workspace_->clear_errors(d);
  CallErrors e;
  e.bad_ids = words[kErrBadIds];
  e.first_bad_slot = words[kErrFirstBadSlot] == kNoBadSlot ? -1 : words[kErrFirstBadSlot];
  e.bounds_violations = words[kErrBoundsViolations];
  return e;
}

}  // namespace megamoe
