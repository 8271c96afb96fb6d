// Runtime: creation, weight preparation, the bucket's kernels, and forward(): its arguments
// checked, then the call's launches (runtime/layer_launch.hpp).
#include "megamoe/runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "ep/ep_workspace.hpp"
#include "ep/group.hpp"
#include "jit/diagnostics.hpp"
#include "runtime/ep_launch.hpp"
#include "runtime/layer_launch.hpp"
#include "weights/fp8_resident_layout.hpp"
#include "weights/tensor_core_layout.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

namespace {

// RuntimeOptions::timeout_ms, or MEGAMOE_TIMEOUT_MS where set.
int timeout_ms(const RuntimeOptions& o) {
  const char* env = std::getenv("MEGAMOE_TIMEOUT_MS");
  if (!env || !*env) return o.timeout_ms;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end || v < 1 || v > 3600000)
    throw Error(fmt::format("megamoe: MEGAMOE_TIMEOUT_MS = '{}', expected milliseconds from 1 to 3600000", env));
  return int(v);
}

void check_group_options(const Config& c, const RuntimeOptions& o) {
  if (o.world < 1 || o.world > kMaxWorld)
    throw Error(fmt::format("megamoe: RuntimeOptions.world = {}, expected 1..{}", o.world, int(kMaxWorld)));
  if (o.rank < 0 || o.rank >= o.world)
    throw Error(fmt::format("megamoe: RuntimeOptions.rank = {}, expected 0..{} (world {})", o.rank, o.world - 1, o.world));
  if (o.timeout_ms < 1)
    throw Error(fmt::format("megamoe: RuntimeOptions.timeout_ms = {}, expected at least 1", o.timeout_ms));
  if (o.routed_rows_capacity < 0)
    throw Error(fmt::format("megamoe: RuntimeOptions.routed_rows_capacity = {}, expected 0 (the worst case) or more",
                            o.routed_rows_capacity));
  const long long worst = (long long)o.world * o.max_tokens * c.model.topk;
  if (std::min(o.routed_rows_capacity > 0 ? o.routed_rows_capacity : worst, worst) > (1LL << 30))
    throw Error(fmt::format("megamoe: {} routed rows a rank (world {} x max_tokens {} x topk {}): set "
                            "RuntimeOptions.routed_rows_capacity to at most 2^30",
                            worst, o.world, o.max_tokens, c.model.topk));
  if (o.world > 1)
    for (const BucketConfig& b : c.buckets)
      if (b.combine_wire != c.buckets[0].combine_wire)
        throw Error(fmt::format("megamoe: config {}: buckets {} and {} have combine wires {} and {}; over several ranks a "
                                "rank's outputs go onto another rank's wire (whose bucket may differ), so every bucket "
                                "needs the same",
                                c.name, c.buckets[0].bucket, b.bucket, to_string(c.buckets[0].combine_wire),
                                to_string(b.combine_wire)));
  if ((long long)c.model.experts_per_rank * o.world >= (1 << 15) || o.max_tokens * (long long)c.model.topk >= (1 << 21))
    throw Error(fmt::format("megamoe: world {} x {} experts, max_tokens {} x topk {}: the dispatch metadata holds "
                            "fewer than 2^15 global experts and 2^21 slots a rank",
                            o.world, c.model.experts_per_rank, o.max_tokens, c.model.topk));
}

// Loopback ranks share one GPU: each launch of a rank takes at most this many blocks, each alone
// on its SM, so that every rank's running kernel is resident at once with room for Stage1's
// clusters of two in any GPC (docs/ep.md).
unsigned loopback_share(const Device& d, int world) { return unsigned(std::max(2, (d.multiprocessors() - 16) / world / 2 * 2)); }
// Dynamic shared memory that keeps a second block off an SM (an H200 SM has 228 KB).
constexpr int kLoopbackExclusiveSmem = 116 * 1024;

}  // namespace

Runtime::Runtime(Config config, RuntimeOptions options, std::unique_ptr<Device> device)
    : config_(std::move(config)), options_(std::move(options)), device_(std::move(device)) {
  path_choice_ = choose_path(options_.path, config_, device_->kind(), device_->arch());
  path_ = path_choice_.path;
  announce_path_choice(path_choice_);
  // Only the Hopper kernels read an fp8-resident copy, and only where the options allow it.
  if (path_ != KernelPath::hopper || !options_.fp8_resident_weights)
    for (BucketConfig& b : config_.buckets) b.weights = WeightSource::mxfp4;
  if (options_.max_tokens < 1 || options_.max_tokens > kMaxBucket)
    throw Error(fmt::format("megamoe: RuntimeOptions.max_tokens = {}, expected 1..{}", options_.max_tokens, kMaxBucket));
  check_group_options(config_, options_);
  options_.timeout_ms = timeout_ms(options_);
  try {
    workspace_ = std::make_unique<Workspace>(Workspace::create(*device_, config_, options_, path_));
    if (options_.world > 1)
      ep_ = EpWorkspace::create(*device_, config_, options_, path_arithmetic(path_, config_.model).x);
  } catch (const DeviceError& e) {
    throw DeviceError(fmt::format("megamoe: the workspace of rank {} (max_tokens {}, world {}, {} routed rows) did not "
                                  "fit on {}: {}; lower RuntimeOptions.max_tokens or routed_rows_capacity",
                                  options_.rank, options_.max_tokens, options_.world,
                                  routed_rows_capacity(config_, options_), device_->name(), e.what()));
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

std::unique_ptr<Runtime> Runtime::create(std::string_view config_name, RuntimeOptions options) {
  return create(load_config(config_name), std::move(options));
}

std::unique_ptr<Runtime> Runtime::create(Config config, RuntimeOptions options) {
  if (options.world <= 1)
    return std::unique_ptr<Runtime>(
        new Runtime(std::move(config), options, open_device(options.backend, options.device)));
  if (options.transport != Transport::ipc)
    throw Error(fmt::format("megamoe: Runtime::create with world {} runs one rank per process (transport ipc); "
                            "Runtime::create_ranks makes {} ranks in one process",
                            options.world, to_string(options.transport)));
  auto group = std::make_shared<Group>();
  group->transport = Transport::ipc;
  group->world = options.world;
  group->all_gather = options.all_gather;
  if (!group->all_gather) {
    const char* dir = std::getenv("MEGAMOE_BOOTSTRAP_DIR");
    if (!dir || !*dir)
      throw Error("megamoe: the ipc transport needs RuntimeOptions.all_gather, or MEGAMOE_BOOTSTRAP_DIR naming a "
                  "folder every rank can write");
    group->all_gather = folder_all_gather(dir, options.rank, options.world, 10 * options.timeout_ms + 60000);
  }
  std::unique_ptr<Runtime> rt(new Runtime(std::move(config), options, open_device(options.backend, options.device)));
  rt->group_ = group;
  rt->connect_ipc_peers();
  rt->load_every_bucket();
  group->barrier();  // every rank's kernels are loaded: no first call waits for a compile
  return rt;
}

std::vector<std::unique_ptr<Runtime>> Runtime::create_ranks(std::string_view config_name, RuntimeOptions options) {
  if (options.world < 1 || options.world > kMaxWorld)
    throw Error(fmt::format("megamoe: RuntimeOptions.world = {}, expected 1..{}", options.world, int(kMaxWorld)));
  if (options.transport == Transport::ipc)
    throw Error("megamoe: Runtime::create_ranks makes the ranks of one process (transport loopback or peer); with "
                "ipc, each process calls Runtime::create");
  const int world = options.world;
  std::vector<int> devices = options.devices;
  if (options.transport == Transport::loopback) devices.assign(world, options.device);
  if (devices.empty())
    for (int r = 0; r < world; ++r) devices.push_back(r);
  if (int(devices.size()) != world)
    throw Error(fmt::format("megamoe: RuntimeOptions.devices has {} entries, expected world = {}", devices.size(), world));
  if (options.transport == Transport::peer)
    for (int a = 0; a < world; ++a)
      for (int b = 0; b < a; ++b)
        if (devices[a] == devices[b])
          throw Error(fmt::format("megamoe: RuntimeOptions.devices names GPU {} for ranks {} and {}: the peer transport "
                                  "runs a rank per GPU (loopback runs every rank on one GPU)",
                                  devices[a], b, a));
  Config config = load_config(config_name);
  auto group = std::make_shared<Group>();
  group->transport = options.transport;
  group->world = world;
  std::vector<std::unique_ptr<Runtime>> ranks;
  for (int r = 0; r < world; ++r) {
    RuntimeOptions o = options;
    o.rank = r;
    o.device = devices[r];
    ranks.emplace_back(new Runtime(config, o, open_device(o.backend, o.device)));
    ranks.back()->group_ = group;
    group->ranks.push_back(ranks.back().get());
  }
  if (world == 1) return ranks;
  if (options.transport == Transport::loopback) {
    group->loopback_share = int(loopback_share(ranks[0]->device(), world));
    const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (ranks[0]->device().kind() == BackendKind::cuda && (!connections || std::atoi(connections) < world + 1))
      warn(fmt::format("loopback ranks: CUDA_DEVICE_MAX_CONNECTIONS is {}, under world + 1 = {}: a rank's kernel can "
                       "then queue behind another's and time out; set it (the tools set 32) before the process's "
                       "first CUDA call",
                       connections ? connections : "unset (8)", world + 1));
  }
  for (auto& a : ranks)
    for (auto& b : ranks) {
      if (options.transport == Transport::peer && a != b) {
        if (!a->device().can_access_peer(b->device()))
          throw DeviceError(fmt::format("megamoe: GPU {} cannot access GPU {}'s memory (peer access): the peer transport "
                                        "needs every pair of the group's GPUs connected",
                                        a->device().ordinal(), b->device().ordinal()));
        a->device().enable_peer_access(b->device());
      }
      a->ep_->peers[b->rank()] = b->ep_->region.get();
    }
  for (auto& rt : ranks) rt->load_every_bucket();
  return ranks;
}

// The ipc transport: every rank's record (its rank, what it was created with, its region's
// handle) through the group's all-gather; the peers' regions mapped.
void Runtime::connect_ipc_peers() {
  const SymmetricLayout& l = ep_->layout;
  const std::string fingerprint =
      fmt::format("{}|{}|{}x{}x{}x{}|{}|{}|{}|{}|{}", config_.name, to_string(config_.activation.kind),
                  config_.model.experts_per_rank, config_.model.model_dim, config_.model.inter_dim, config_.model.topk,
                  to_string(path_), options_.max_tokens, workspace_->rows_capacity, l.bytes, options_.world);
  const std::string handle = device_->ipc_handle(ep_->region.get());
  constexpr std::size_t kFingerprintBytes = 192, kHandleBytes = 128;
  if (fingerprint.size() >= kFingerprintBytes || handle.size() > kHandleBytes)
    throw Error(fmt::format("megamoe: the group's bootstrap record holds {} bytes of config, this one needs {}",
                            kFingerprintBytes - 1, fingerprint.size()));
  std::vector<std::uint8_t> mine(8 + kFingerprintBytes + kHandleBytes, 0);
  const std::int32_t head[2] = {options_.rank, std::int32_t(handle.size())};
  std::memcpy(mine.data(), head, 8);
  std::memcpy(mine.data() + 8, fingerprint.data(), fingerprint.size());
  std::memcpy(mine.data() + 8 + kFingerprintBytes, handle.data(), handle.size());
  const std::vector<std::uint8_t> all = group_->all_gather(mine);
  if (all.size() != mine.size() * std::size_t(options_.world))
    throw Error(fmt::format("megamoe: the group's all-gather returned {} bytes, expected {} ranks x {}", all.size(),
                            options_.world, mine.size()));
  for (int r = 0; r < options_.world; ++r) {
    const std::uint8_t* rec = all.data() + std::size_t(r) * mine.size();
    std::int32_t h[2];
    std::memcpy(h, rec, 8);
    const std::string theirs(reinterpret_cast<const char*>(rec + 8));
    if (h[0] != r)
      throw Error(fmt::format("megamoe: the all-gather's record {} comes from rank {}: every rank needs its own rank "
                              "(RuntimeOptions.rank) and the records in rank order",
                              r, h[0]));
    if (theirs != fingerprint)
      throw Error(fmt::format("megamoe: rank {} was created with '{}', rank {} with '{}' (config|activation|shape|path|"
                              "max_tokens|routed rows|region bytes|world): every rank needs the same",
                              r, theirs, options_.rank, fingerprint));
    if (r != options_.rank) {
      void* p = device_->open_ipc_handle(
          std::string(reinterpret_cast<const char*>(rec + 8 + kFingerprintBytes), std::size_t(h[1])));
      ep_->opened.push_back(p);
      ep_->peers[r] = p;
    }
  }
}

// Several ranks: every bucket's kernels up to max_tokens', so that no call compiles.
void Runtime::load_every_bucket() {
  const int last = bucket_for_tokens(options_.max_tokens);
  for (const BucketConfig& b : config_.buckets)
    if (b.bucket <= last) ep_kernels_for(b.bucket);
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
  // The fp8-resident copy only where a bucket this runtime can use (up to max_tokens' bucket)
  // reads it; the constructor cleared it on other paths and where the options refuse it.
  const int top = bucket_for_tokens(options_.max_tokens);
  const bool resident = std::any_of(config_.buckets.begin(), config_.buckets.end(), [&](const BucketConfig& b) {
    return b.bucket <= top && b.weights == WeightSource::fp8_resident;
  });
  TensorCoreWeights w1 = to_tensor_core_layout(w.w1_packed.data(), w.w1_scales.data(), w.experts, 2 * w.inter_dim,
                                               w.model_dim, true);
  p->w1_units = upload(w1.units), p->w1_row_scale = upload(w1.row_scale);
  p->flushed_blocks = w1.flushed_blocks;
  if (resident) p->w1_resident = upload(to_fp8_resident_layout(w1, w.experts, 2 * w.inter_dim, w.model_dim));
  w1 = {};
  TensorCoreWeights w2 = to_tensor_core_layout(w.w2_packed.data(), w.w2_scales.data(), w.experts, w.model_dim,
                                               w.inter_dim, false);
  p->w2_units = upload(w2.units), p->w2_row_scale = upload(w2.row_scale);
  p->flushed_blocks += w2.flushed_blocks;
  if (resident) p->w2_resident = upload(to_fp8_resident_layout(w2, w.experts, w.model_dim, w.inter_dim));
  p->resident_bytes = p->w1_resident.bytes() + p->w2_resident.bytes();
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

const EpBucketKernels& Runtime::ep_kernels_for(std::int64_t tokens) {
  const BucketConfig& bucket = config_.bucket_for_tokens(tokens);
  auto& slot = ep_loaded_[bucket.bucket];
  if (!slot) {
    const bool loopback = group_ && group_->transport == Transport::loopback;
    slot = load_ep_bucket_kernels(*device_, shared_kernel_builder(device_->kind(), device_->arch()), bucket,
                                  ep_layer_kernels(config_, bucket, path_),
                                  loopback && device_->kind() == BackendKind::cuda ? kLoopbackExclusiveSmem : 0);
  }
  return *slot;
}

void Runtime::prepare(std::int64_t tokens) {
  if (options_.world > 1) ep_kernels_for(tokens);
  else kernels_for(tokens);
}

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
  const LayerCall call{{*device_, stream, options_.profile ? stage_events_ : nullptr}, m, kernels, *workspace_, w,
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
  const EpCall call{{*device_, stream, options_.profile ? stage_events_ : nullptr},
                    config_.model,
                    *kernels.bucket,
                    kernels,
                    *workspace_,
                    *ep_,
                    ep_->args(static_cast<int*>(workspace_->errors.get()), options_.timeout_ms),
                    w,
                    x,
                    ids,
                    route_weights,
                    y,
                    tokens,
                    options_.serial,
                    !loopback,
                    loopback ? unsigned(group_->loopback_share) : 0u};
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
