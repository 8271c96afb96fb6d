// A group's set-up: its options checked, the ipc group's all-gather, and the ranks made and
// connected (Runtime::create with several ranks, Runtime::create_ranks, the ipc peers' regions).
#include "ep/group.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "backend/cuda/nvshmem_library.hpp"
#include "ep/ep_workspace.hpp"
#include "jit/diagnostics.hpp"
#include "runtime/workspace.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

int group_timeout_ms(const RuntimeOptions& o) {
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
  if (o.world > 1)
    for (const BucketConfig& b : c.buckets)
      if (b.x_scale != c.buckets[0].x_scale || b.h_scale != c.buckets[0].h_scale)
        throw Error(fmt::format("megamoe: config {}: buckets {} and {} have scale modes x {} h {} and x {} h {}; over "
                                "several ranks a rank's x goes onto another rank's dispatch wire and its rows are "
                                "computed in that rank's bucket, so every bucket needs the same",
                                c.name, c.buckets[0].bucket, b.bucket, to_string(c.buckets[0].x_scale),
                                to_string(c.buckets[0].h_scale), to_string(b.x_scale), to_string(b.h_scale)));
  if (o.max_tokens * (long long)c.model.topk >= (1 << 21))
    throw Error(fmt::format("megamoe: max_tokens {} x topk {}: the dispatch metadata holds fewer than 2^21 slots a rank",
                            o.max_tokens, c.model.topk));
}

std::shared_ptr<Group> make_ipc_group(const RuntimeOptions& options) {
  auto group = std::make_shared<Group>();
  group->transport = options.transport;
  group->world = options.world;
  group->all_gather = options.all_gather;
  if (!group->all_gather) {
    const char* dir = std::getenv("MEGAMOE_BOOTSTRAP_DIR");
    if (!dir || !*dir)
      throw Error(fmt::format("megamoe: the {} transport needs RuntimeOptions.all_gather, or MEGAMOE_BOOTSTRAP_DIR "
                              "naming a folder every rank can write",
                              to_string(options.transport)));
    group->all_gather = folder_all_gather(dir, options.rank, options.world, 10 * options.timeout_ms + 60000);
  }
  return group;
}

std::vector<std::string> exchange_records(const Group& group, int rank, int world, const std::string& fingerprint,
                                          const std::string& what, const std::string& payload) {
  constexpr std::size_t kFingerprintBytes = 192, kPayloadBytes = 256;
  if (fingerprint.size() >= kFingerprintBytes || payload.size() > kPayloadBytes)
    throw Error(fmt::format("megamoe: the group's bootstrap record holds {} bytes of config and {} of payload, this "
                            "one needs {} and {}",
                            kFingerprintBytes - 1, kPayloadBytes, fingerprint.size(), payload.size()));
  const std::size_t record = 8 + kFingerprintBytes + kPayloadBytes;
  std::vector<std::uint8_t> mine(record, 0);
  const std::int32_t head[2] = {rank, std::int32_t(payload.size())};
  std::memcpy(mine.data(), head, 8);
  std::memcpy(mine.data() + 8, fingerprint.data(), fingerprint.size());
  std::memcpy(mine.data() + 8 + kFingerprintBytes, payload.data(), payload.size());
  const std::vector<std::uint8_t> all = group.all_gather(mine);
  if (all.size() != record * std::size_t(world))
    throw Error(fmt::format("megamoe: the group's all-gather returned {} bytes, expected {} ranks x {}", all.size(),
                            world, record));
  std::vector<std::string> payloads;
  for (int r = 0; r < world; ++r) {
    const std::uint8_t* rec = all.data() + std::size_t(r) * record;
    std::int32_t h[2];
    std::memcpy(h, rec, 8);
    const std::string theirs(reinterpret_cast<const char*>(rec + 8));
    if (h[0] != r)
      throw Error(fmt::format("megamoe: the all-gather's record {} comes from rank {}: every rank needs its own rank "
                              "(RuntimeOptions.rank) and the records in rank order",
                              r, h[0]));
    if (theirs != fingerprint)
      throw Error(fmt::format("megamoe: rank {} was created with '{}', rank {} with '{}' ({}): every rank needs the "
                              "same",
                              r, theirs, rank, fingerprint, what));
    if (h[1] < 0 || std::size_t(h[1]) > kPayloadBytes)
      throw Error(fmt::format("megamoe: rank {}'s bootstrap record says {} bytes of payload, at most {}", r, h[1],
                              kPayloadBytes));
    payloads.emplace_back(reinterpret_cast<const char*>(rec + 8 + kFingerprintBytes), std::size_t(h[1]));
  }
  return payloads;
}

void start_nvshmem(Device& device, const Group& group, const RuntimeOptions& o, const std::string& fingerprint,
                   std::size_t region_bytes) {
  Nvshmem& shmem = Nvshmem::get();  // before any rank waits on the others: a rank without NVSHMEM says so
  const std::vector<std::uint8_t> mine = o.rank == 0 ? shmem.unique_id() : std::vector<std::uint8_t>();
  const std::string id0 = exchange_records(
      group, o.rank, o.world, fingerprint, "config|experts x model_dim x inter_dim x topk|path|max_tokens|routed rows|"
      "region bytes|node size", std::string(mine.begin(), mine.end()))[0];
  device.make_current();
  // Room for the region and NVSHMEM's own (its signals, its barrier's work space).
  shmem.init(std::vector<std::uint8_t>(id0.begin(), id0.end()), o.rank, o.world, region_bytes + (256ull << 20));
}

unsigned loopback_share(const Device& d, int world) { return unsigned(std::max(2, (d.multiprocessors() - 16) / world / 2 * 2)); }

std::unique_ptr<Runtime> Runtime::create_ipc_rank(Config config, RuntimeOptions options) {
  if (options.transport != Transport::ipc && options.transport != Transport::nvshmem)
    throw Error(fmt::format("megamoe: Runtime::create with world {} runs one rank per process (transport ipc or "
                            "nvshmem); Runtime::create_ranks makes {} ranks in one process",
                            options.world, to_string(options.transport)));
  if (options.node_size < 0 || (options.node_size > 0 && options.world % options.node_size))
    throw Error(fmt::format("megamoe: RuntimeOptions.node_size = {}, expected 0 (one node) or a divisor "
                            "of world = {}",
                            options.node_size, options.world));
  std::shared_ptr<Group> group = make_ipc_group(options);
  std::unique_ptr<Device> device = open_device(options.backend, options.device);
  if (options.transport == Transport::nvshmem) {
    RuntimeOptions resolved = options;  // `config` holds its redundant slots already
    resolved.redundant_experts = 0;
    const WorkspaceBytes planned = workspace_bytes(config, resolved, device->arch());
    start_nvshmem(*device, *group, options,
                  fmt::format("{}|{}x{}x{}x{}|{}|{}|{}|{}|{}", config.name, config.model.experts, config.model.model_dim,
                              config.model.inter_dim, config.model.topk, to_string(options.path), options.max_tokens,
                              planned.routed_rows, planned.symmetric_region, options.node_size),
                  planned.symmetric_region);
  }
  std::unique_ptr<Runtime> rt(new Runtime(std::move(config), options, std::move(device)));
  rt->group_ = group;
  rt->connect_ipc_peers();
  rt->load_every_bucket();
  group->barrier();  // every rank's kernels are loaded: no first call waits for a compile
  return rt;
}

std::vector<std::unique_ptr<Runtime>> Runtime::create_ranks(std::string_view config_name, RuntimeOptions options) {
  return create_ranks(load_config(config_name), std::move(options));
}

std::vector<std::unique_ptr<Runtime>> Runtime::create_ranks(Config config, RuntimeOptions options) {
  if (options.world < 1 || options.world > kMaxWorld)
    throw Error(fmt::format("megamoe: RuntimeOptions.world = {}, expected 1..{}", options.world, int(kMaxWorld)));
  if (options.transport == Transport::ipc || options.transport == Transport::nvshmem)
    throw Error(fmt::format("megamoe: Runtime::create_ranks makes the ranks of one process (transport loopback or "
                            "peer); with {}, each process calls Runtime::create",
                            to_string(options.transport)));
  const int world = options.world;
  // A loopback rank's kernel waits for the others' running kernels: each rank's stream needs a
  // hardware queue of its own beside the process's, world + 1, and CUDA has at most 32
  // (CUDA_DEVICE_MAX_CONNECTIONS; measured: 32 ranks on an H100 time out in the counts phase).
  if (options.transport == Transport::loopback && world > 31)
    throw Error(fmt::format("megamoe: RuntimeOptions.world = {} on the loopback transport: its ranks share one GPU's "
                            "hardware queues, world + 1 of them, and CUDA has 32: at most 31 loopback ranks; run {} "
                            "ranks as processes (ipc or nvshmem) or over GPUs (peer)",
                            world, world));
  config = config_for_options(std::move(config), options);  // before a GPU is opened
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
      a->ep_->peers[b->rank()] = b->ep_->region->get();
    }
  for (auto& rt : ranks) rt->load_every_bucket();
  return ranks;
}

// The ipc transport: every rank's record (its rank, what it was created with, its region's
// handle) through the group's all-gather; the peers' regions mapped.
void Runtime::connect_ipc_peers() {
  const std::string fingerprint =
      fmt::format("{}|{}|{}x{}x{}x{}|{}|{}|{}|{}|{}", config_.name, to_string(config_.activation.kind),
                  config_.model.experts_per_rank, config_.model.model_dim, config_.model.inter_dim, config_.model.topk,
                  to_string(path_), options_.max_tokens, workspace_->rows_capacity, ep_->layout.bytes, options_.world);
  // nvshmem: the region is NVSHMEM's (mapped by it); the records only check the ranks agree.
  const std::string handle = options_.transport == Transport::ipc ? device_->ipc_handle(ep_->region->get()) : "";
  const std::vector<std::string> handles =
      exchange_records(*group_, options_.rank, options_.world, fingerprint,
                       "config|activation|shape|path|max_tokens|routed rows|region bytes|world", handle);
  if (options_.transport != Transport::ipc) return;
  for (int r = 0; r < options_.world; ++r)
    if (r != options_.rank) {
      void* p = device_->open_ipc_handle(handles[std::size_t(r)]);
      ep_->opened.push_back(p);
      ep_->peers[r] = p;
    }
}

}  // namespace megamoe
