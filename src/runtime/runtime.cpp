// Runtime: creation, the bucket's kernels, and forward(): its arguments checked, then the call's
// launches (runtime/launch_layer.hpp). A group's ranks are made in runtime/group_ranks.cpp (its
// set-up in ep/group.cpp), the weights' upload in weights/prepare_weights.cpp.
#include "megamoe/runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "common/diagnostics.hpp"
#include "config/path_requirements.hpp"
#include "ep/ep_workspace.hpp"
#include "config/shared_slots.hpp"
#include "ep/group.hpp"
#include "runtime/launch_ep.hpp"
#include "runtime/launch_layer.hpp"
#include "runtime/rank_options.hpp"
#include "runtime/stage_args.hpp"
#include "runtime/workspace.hpp"
#include "weights/prepare_weights.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

namespace {

// Dynamic shared memory that keeps a second block off an SM (an H200 SM has 228 KB): each
// launch of a loopback rank runs its blocks alone on their SMs (ep/group.hpp, loopback_share).
constexpr int kLoopbackExclusiveSmem = 116 * 1024;

void check_max_tokens(const RuntimeOptions& o) {
  if (o.max_tokens < 1 || o.max_tokens > kMaxBucket)
    throw Error(fmt::format("megamoe: RuntimeOptions.max_tokens = {}, expected 1..{}", o.max_tokens, kMaxBucket));
}

// The sizes from the config at the path's shape; x_block: the dispatch wire's (every bucket's
// over several ranks, check_group_options).
WorkspaceBytes planned_workspace(const Config& kernels_config, const RuntimeOptions& o, KernelPath path) {
  WorkspaceBytes b;
  b.layer = workspace_sizes(kernels_config, o, path).total();
  b.routed_rows = routed_rows_capacity(kernels_config, o);
  if (o.world > 1) {
    const int x_block = path_arithmetic(path, kernels_config, kernels_config.buckets[0]).x;
    b.symmetric_region = ep_symmetric_layout(kernels_config, group_options(o), x_block, b.routed_rows).bytes;
    b.group_plan = ep_plan_sizes(kernels_config, group_options(o)).total();
  }
  return b;
}

}  // namespace

// `config` comes resolved for options.world (create, create_ranks: before any GPU is opened).
Runtime::Runtime(Config config, RuntimeOptions options, std::unique_ptr<Device> device)
    : config_(std::move(config)), options_(std::move(options)), device_(std::move(device)) {
  table_choice_ = choose_table(config_, device_->name(), options_.bucket_table);
  config_ = with_chosen_table(std::move(config_), table_choice_);
  if (table_choice_.warn) warn_once(table_choice_.note);
  path_choice_ = choose_path(options_.path, config_, device_->kind(), device_->arch());
  path_ = path_choice_.path;
  announce_path_choice(path_choice_);
  settle_weight_sources(config_, path_, options_.fp8_resident_weights);
  kernels_config_ = padded_for_path(shared_slots_config(config_), path_);
  check_max_tokens(options_);
  check_group_options(kernels_config_, group_options(options_));
  options_.timeout_ms = group_timeout_ms(group_options(options_));
  try {
    workspace_ = std::make_unique<Workspace>(Workspace::create(*device_, kernels_config_, options_, path_));
    if (options_.world > 1)
      // every bucket has the same x scale over several ranks (check_group_options): the wire's
      ep_ = EpWorkspace::create(*device_, kernels_config_, group_options(options_), arithmetic(1).x,
                                routed_rows_capacity(kernels_config_, options_));
  } catch (const DeviceError& e) {
    throw DeviceError(fmt::format("megamoe: the workspace of rank {} (max_tokens {}, world {}, {} routed rows) did not "
                                  "fit on {}: {}; lower RuntimeOptions.max_tokens or routed_rows_capacity",
                                  options_.rank, options_.max_tokens, options_.world,
                                  routed_rows_capacity(kernels_config_, options_), device_->name(), e.what()));
  }
  for (auto& e : stage_events_) e = device_->create_event();
}

Runtime::~Runtime() {
  if (group_)
    for (auto& r : group_->ranks)
      if (r == this) r = nullptr;
  for (auto& e : stage_events_)
    if (e) device_->destroy_event(e);
}

// The config and path a runtime created with these would hold, without a GPU (for the statements
// of its memory): creation's checks, then `auto` resolved for `arch`.
static std::pair<Config, KernelPath> planned_config(Config config, const RuntimeOptions& options, std::string_view arch,
                                                   const char* what) {
  config = config_for_options(std::move(config), options);
  // No GPU here: the table named, else the default (a card's own may hold other buckets).
  config = with_chosen_table(std::move(config), choose_table(config, "", options.bucket_table));
  check_max_tokens(options);
  check_group_options(shared_slots_config(config), group_options(options));
  if (options.path == KernelPath::automatic && arch.empty())
    throw Error(fmt::format("megamoe: {}: RuntimeOptions.path = auto and no arch: the bytes depend on the path (the "
                            "Hopper path keeps x by routed row and its own weight layout); name the path, or the "
                            "GPU's arch (\"sm_90a\") for auto to resolve as it would on that GPU",
                            what));
  // A named path is checked against the arch given, or the backend's default target.
  const std::string target = !arch.empty() ? std::string(arch) : options.backend == BackendKind::hip ? "gfx90a" : "sm_90a";
  const KernelPath path = choose_path(options.path, config, options.backend, target).path;
  settle_weight_sources(config, path, options.fp8_resident_weights);
  return {std::move(config), path};
}

WorkspaceBytes Runtime::workspace_bytes(Config config, const RuntimeOptions& options, std::string_view arch) {
  auto [planned, path] = planned_config(std::move(config), options, arch, "workspace_bytes");
  return planned_workspace(padded_for_path(shared_slots_config(planned), path), options, path);
}

std::size_t Runtime::weights_bytes(Config config, const RuntimeOptions& options, std::string_view arch) {
  auto [planned, path] = planned_config(std::move(config), options, arch, "weights_bytes");
  return prepared_weights_bytes(planned, path, options.max_tokens);
}

WorkspaceBytes Runtime::workspace_bytes() const {
  WorkspaceBytes b;
  b.layer = workspace_->bytes();
  b.routed_rows = workspace_->rows_capacity;
  if (ep_) b.symmetric_region = ep_->region->bytes(), b.group_plan = ep_->plan_bytes();
  return b;
}

std::unique_ptr<Runtime> Runtime::create(std::string_view config_name, RuntimeOptions options) {
  return create(load_config(config_name), std::move(options));
}

std::unique_ptr<Runtime> Runtime::create(Config config, RuntimeOptions options) {
  config = config_for_options(std::move(config), options);  // before a GPU is opened
  if (options.world <= 1)
    return std::unique_ptr<Runtime>(
        new Runtime(std::move(config), options, open_device(options.backend, options.device)));
  return create_ipc_rank(std::move(config), std::move(options));
}

// Several ranks: every bucket's kernels up to max_tokens', so that no call compiles.
void Runtime::load_every_bucket() {
  for (std::int64_t tokens = 1;; tokens *= 2) {
    ep_kernels_for(std::min<std::int64_t>(tokens, options_.max_tokens));
    if (tokens >= options_.max_tokens) break;
  }
}

std::unique_ptr<PreparedWeights> Runtime::prepare_weights(const Mxfp4ExpertWeights& w) {
  return megamoe::prepare_weights(*device_, config_, path_, options_.max_tokens, w);
}

const BucketKernels& Runtime::kernels_for(std::int64_t tokens) {
  const BucketConfig& bucket = config_.bucket_for_tokens(tokens);
  auto& slot = loaded_[bucket.bucket];
  if (!slot)
    slot = load_bucket_kernels(*device_, shared_kernel_builder(device_->kind(), device_->arch()), bucket,
                               layer_kernels(kernels_config_, bucket, path_));
  return *slot;
}

const EpBucketKernels& Runtime::ep_kernels_for(std::int64_t tokens) {
  const BucketConfig& bucket = config_.bucket_for_tokens(tokens);
  auto& slot = ep_loaded_[bucket.bucket];
  if (!slot) {
    const bool loopback = group_ && group_->transport == Transport::loopback;
    slot = load_ep_bucket_kernels(*device_, shared_kernel_builder(device_->kind(), device_->arch()), bucket,
                                  ep_layer_kernels(kernels_config_, bucket, path_, options_.world, options_.transport == Transport::nvshmem),
                                  loopback && device_->kind() == BackendKind::cuda ? kLoopbackExclusiveSmem : 0);
  }
  return *slot;
}

void Runtime::prepare(std::int64_t tokens) {
  if (options_.world > 1) ep_kernels_for(tokens);
  else kernels_for(tokens);
}

PathArithmetic Runtime::arithmetic(std::int64_t tokens) const {
  return path_arithmetic(path_, kernels_config_, config_.bucket_for_tokens(tokens));
}

void Runtime::forward(const PreparedWeights& w, const void* x, const int* ids, const float* route_weights, void* y,
                      std::int64_t tokens, StreamHandle stream) {
  if (tokens < 0 || tokens > options_.max_tokens)
    throw Error(fmt::format("megamoe: forward: tokens = {}, expected 0..{} (RuntimeOptions.max_tokens)", tokens,
                            options_.max_tokens));
  const ModelShape& m = config_.model;
  if (w.path != path_)
    throw Error(fmt::format("megamoe: forward: weights were prepared for the {} path, this runtime runs {}",
                            to_string(w.path), to_string(path_)));
  if (w.experts != m.experts_per_rank + m.shared_experts || w.model_dim != m.model_dim || w.inter_dim != m.inter_dim)
    throw Error(fmt::format("megamoe: forward: weights are {} experts x {} x {}, the config wants {} x {} x {}{}",
                            w.experts, w.model_dim, w.inter_dim, m.experts_per_rank + m.shared_experts, m.model_dim,
                            m.inter_dim,
                            m.shared_experts ? fmt::format(" ({} routed and {} shared)", m.experts_per_rank,
                                                           m.shared_experts)
                                             : std::string()));
  for (auto [name, ptr] : {std::pair<const char*, const void*>{"x", x}, {"y", y}})
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16)
      throw Error(fmt::format("megamoe: forward: {} = {}, expected a 16-byte aligned address (rows are read and "
                              "written 16 bytes at a time)",
                              name, ptr));
  if (tokens > 0)
    for (auto [name, ptr] : {std::pair<const char*, const void*>{"x", x}, {"ids", ids}, {"weights", route_weights},
                             {"y", y}})
      if (ptr == nullptr)
        throw Error(
            fmt::format("megamoe: forward: {} is null with tokens = {}, expected a device pointer", name, tokens));
  const BucketConfig& bucket = config_.bucket_for_tokens(std::max<std::int64_t>(tokens, 1));
  if (bucket.weights == WeightSource::fp8_resident && !w.w1_resident.get())  // only ever set on the Hopper path
    throw Error(fmt::format("megamoe: forward: bucket {} of config {} reads the fp8-resident copy of the weights, which "
                            "these weights lack (prepared by a runtime whose buckets use none, or with "
                            "RuntimeOptions.fp8_resident_weights false): prepare them with this runtime",
                            bucket.bucket, config_.name));
  if (options_.world > 1) return forward_ep(w, x, ids, route_weights, y, int(tokens), stream);
  if (tokens == 0) return;
  const BucketKernels& kernels = kernels_for(tokens);
  const StreamLaunch s{*device_, stream, options_.profile ? stage_events_ : nullptr};
  s.mark(StageMark::start);
  CallRoutes routes{ids, route_weights};
  if (kernels.shared_routes)
    routes = launch_shared_routes(s, *kernels.shared_routes, ~0u, true, kernels_config_.model, 1, 0, *workspace_, ids,
                                  route_weights, int(tokens));
  const LayerCall call{s,        kernels_config_.model, m.model_dim, kernels, *workspace_, w, x, routes.ids,
                       routes.weights, y, int(tokens)};
  launch_route(call);
  call.mark(StageMark::routed);
  std::visit([&](const auto& set) { std::decay_t<decltype(set)>::Path::launch(call, set); }, kernels.path);
  call.mark(StageMark::stage2_done);
  launch_combine(call);
  call.mark(StageMark::combined);
}

// Several ranks: every call launches, with no tokens too (the other ranks wait for this one's
// counts and outputs).
void Runtime::forward_ep(const PreparedWeights& w, const void* x, const int* ids, const float* route_weights, void* y,
                         int tokens, StreamHandle stream) {
  if (needs_recover_ || (group_->in_process() && std::any_of(group_->ranks.begin(), group_->ranks.end(),
                                                             [](const Runtime* r) { return r && r->needs_recover_; })))
    throw Error(fmt::format("megamoe: rank {}: a wait of the group timed out (PeerTimeoutError); call recover() {}before "
                            "the next call",
                            options_.rank, group_->in_process() ? "" : "on every rank "));
  if (group_->in_process())
    for (std::size_t r = 0; r < group_->ranks.size(); ++r)
      if (!group_->ranks[r])
        throw Error(fmt::format("megamoe: rank {}: rank {} of this process's group was destroyed; the ranks of a group "
                                "are used and destroyed together",
                                options_.rank, r));
  const EpBucketKernels& kernels = ep_kernels_for(std::max(tokens, 1));
  const bool loopback = group_->transport == Transport::loopback;
  const StreamLaunch s{*device_, stream, options_.profile ? stage_events_ : nullptr};
  const unsigned share = loopback ? unsigned(group_->loopback_share) : 0u;
  s.mark(StageMark::start);
  CallRoutes routes{ids, route_weights};
  if (kernels.shared_routes)
    routes = launch_shared_routes(s, *kernels.shared_routes, share ? share : ~0u, !loopback, kernels_config_.model,
                                  options_.world, options_.rank, *workspace_, ids, route_weights, tokens);
  const EpCall call{s,
                    kernels_config_.model,
                    config_.model.model_dim,
                    *kernels.bucket,
                    kernels,
                    *workspace_,
                    *ep_,
                    ep_->args(error_words(*workspace_), options_.timeout_ms),
                    w,
                    x,
                    routes.ids,
                    routes.weights,
                    y,
                    tokens,
                    options_.serial,
                    !loopback,
                    share};
  launch_ep_call(call);
}

void Runtime::recover() {
  if (options_.world <= 1) {
    workspace_->clear_errors(*device_);
    return;
  }
  // No kernel of the group runs once every rank's device is idle: each wait ends within its bound.
  if (group_->in_process()) {
    for (Runtime* r : group_->ranks)
      if (r) r->device_->synchronize(nullptr);
    for (Runtime* r : group_->ranks)
      if (r) r->ep_->clear(), r->workspace_->clear_errors(*r->device_), r->needs_recover_ = false;
    return;
  }
  device_->synchronize(nullptr);
  group_->barrier();
  ep_->clear();
  workspace_->clear_errors(*device_);
  needs_recover_ = false;
  group_->barrier();
}

StageTimes Runtime::last_stage_times() {
  if (!options_.profile) throw Error("megamoe: last_stage_times() needs RuntimeOptions.profile = true");
  Device& d = *device_;
  d.synchronize(nullptr);
  auto ms = [&](StageMark from, StageMark to) {
    return d.elapsed_ms(stage_events_[int(from)], stage_events_[int(to)]);
  };
  StageTimes t;
  t.route_ms = ms(StageMark::start, StageMark::routed);
  t.quantize_ms = ms(StageMark::routed, StageMark::quantized);
  t.stage1_ms = ms(StageMark::quantized, StageMark::stage1_done);
  t.stage2_ms = ms(StageMark::stage1_done, StageMark::stage2_done);
  t.combine_ms = ms(StageMark::stage2_done, StageMark::combined);
  t.total_ms = ms(StageMark::start, StageMark::combined);
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
  if (const int S = config_.model.shared_experts; S > 0 && e.first_bad_slot >= 0) {
    const int K = config_.model.topk;  // the kernels counted widened slots t * (K + S) + k, k < K
    e.first_bad_slot = e.first_bad_slot / (K + S) * K + e.first_bad_slot % (K + S);
  }
  e.bounds_violations = words[kErrBoundsViolations];
  e.dropped_rows = words[kErrDroppedRows];
  if (words[kErrTimeoutPhase] != 0) {
    needs_recover_ = true;
    static const char* const kPhases[] = {"?", "counts", "rows", "layout", "outputs"};
    const int phase = words[kErrTimeoutPhase];
    throw PeerTimeoutError(options_.rank, words[kErrTimeoutPeer], kPhases[phase >= 1 && phase <= 4 ? phase : 0],
                           options_.timeout_ms);
  }
  return e;
}

}  // namespace megamoe
