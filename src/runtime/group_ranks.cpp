// The Runtime's group creation: a rank of one process (Runtime::create with several ranks, the
// ipc and nvshmem transports), every rank of one process (Runtime::create_ranks), the ipc peers'
// regions mapped. The group's own set-up (checks, all-gather, records, NVSHMEM) is ep/group.cpp.
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/diagnostics.hpp"
#include "ep/ep_workspace.hpp"
#include "ep/group.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/errors.hpp"
#include "megamoe/runtime.hpp"
#include "runtime/rank_options.hpp"
#include "runtime/workspace.hpp"

namespace megamoe {

std::unique_ptr<Runtime> Runtime::create_ipc_rank(Config config, RuntimeOptions options) {
  if (options.transport != Transport::ipc && options.transport != Transport::nvshmem)
    throw Error(fmt::format("megamoe: Runtime::create with world {} runs one rank per process (transport ipc or "
                            "nvshmem); Runtime::create_ranks makes {} ranks in one process",
                            options.world, to_string(options.transport)));
  if (options.node_size < 0 || (options.node_size > 0 && options.world % options.node_size))
    throw Error(fmt::format("megamoe: RuntimeOptions.node_size = {}, expected 0 (one node) or a divisor "
                            "of world = {}",
                            options.node_size, options.world));
  std::shared_ptr<Group> group = make_ipc_group(group_options(options));
  std::unique_ptr<Device> device = open_device(options.backend, options.device);
  if (options.transport == Transport::nvshmem) {
    RuntimeOptions resolved = options;  // `config` holds its redundant slots already
    resolved.redundant_experts = 0;
    const WorkspaceBytes planned = workspace_bytes(config, resolved, device->arch());
    start_nvshmem(*device, *group, group_options(options),
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
  for (auto& r : ranks)  // a group's buckets must agree (their dispatch, wire and tiles run together)
    if (r->table_choice().table != ranks[0]->table_choice().table)
      throw Error(fmt::format("megamoe: the group's GPUs take different bucket tables (rank 0 on {}: {}; rank {} on {}: "
                              "{}): name one for every rank with RuntimeOptions.bucket_table",
                              ranks[0]->table_choice().card, ranks[0]->table_choice().note, r->rank(),
                              r->table_choice().card, r->table_choice().note));
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
      fmt::format("{}|{}|{}x{}x{}x{}|{}|{}|{}|{}|{}|{}", config_.name, to_string(config_.activation.kind),
                  config_.model.experts_per_rank, config_.model.model_dim, config_.model.inter_dim, config_.model.topk,
                  to_string(path_), options_.max_tokens, workspace_->rows_capacity, ep_->layout.bytes, options_.world,
                  table_choice_.edited ? "edited" : table_name(table_choice_.table));
  // nvshmem: the region is NVSHMEM's (mapped by it); the records only check the ranks agree.
  const std::string handle = options_.transport == Transport::ipc ? device_->ipc_handle(ep_->region->get()) : "";
  const std::vector<std::string> handles =
      exchange_records(*group_, options_.rank, options_.world, fingerprint,
                       "config|activation|shape|path|max_tokens|routed rows|region bytes|world|bucket table", handle);
  if (options_.transport != Transport::ipc) return;
  for (int r = 0; r < options_.world; ++r)
    if (r != options_.rank) {
      void* p = device_->open_ipc_handle(handles[std::size_t(r)]);
      ep_->opened.push_back(p);
      ep_->peers[r] = p;
    }
}

}  // namespace megamoe
