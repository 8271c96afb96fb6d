// The group a rank belongs to: the transport, the ranks, and how the host side meets the others
// (the ipc transport's all-gather; in one process, the other ranks' runtimes themselves). Its
// set-up, in group.cpp: the options a group needs checked, the ipc group's all-gather, the records
// every rank hands round, NVSHMEM started. The Runtime's group creation is runtime/group_ranks.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/ep.hpp"
#include "ep/group_options.hpp"

namespace megamoe {

class Runtime;

struct Group {
  Transport transport = Transport::loopback;
  int world = 1;
  AllGather all_gather;          // ipc
  std::vector<Runtime*> ranks;   // loopback and peer: every rank of the process, by rank
  int loopback_share = 0;        // loopback: blocks per SM-exclusive grid of each rank (docs/ep.md)

  bool in_process() const { return transport == Transport::loopback || transport == Transport::peer; }
  // ipc: returns once every rank has called it.
  void barrier() const { all_gather(std::vector<std::uint8_t>(1, 0)); }
};

// Throws megamoe::Error for a world, rank, timeout or routed-rows capacity out of range, buckets
// whose combine wires or scale modes differ over several ranks, or a group too large for the
// dispatch metadata.
void check_group_options(const Config& config, const GroupOptions& options);

// GroupOptions::timeout_ms, or MEGAMOE_TIMEOUT_MS where set (throws megamoe::Error for a value
// that is not milliseconds from 1 to 3600000).
int group_timeout_ms(const GroupOptions& options);

// The group of a rank of one process (ipc, nvshmem): GroupOptions::all_gather, or
// folder_all_gather of MEGAMOE_BOOTSTRAP_DIR (throws megamoe::Error where neither is given).
std::shared_ptr<Group> make_ipc_group(const GroupOptions& options);

// Every rank's payload (an IPC handle, NVSHMEM's unique id), gathered through the group's
// all-gather with what each rank was created with (`fingerprint`, the fields `what` names):
// megamoe::Error where a record comes out of rank order or a rank's fingerprint differs.
std::vector<std::string> exchange_records(const Group& group, int rank, int world, const std::string& fingerprint,
                                          const std::string& what, const std::string& payload);

// The nvshmem transport: NVSHMEM started on `device` as PE options.rank, from rank 0's unique id
// handed round by the group's all-gather with what each rank was created with (`fingerprint`,
// refused where two differ, before the symmetric heap is touched); the heap holds region_bytes.
void start_nvshmem(Device& device, const Group& group, const GroupOptions& options, const std::string& fingerprint,
                   std::size_t region_bytes);

// Loopback ranks share one GPU: each launch of a rank takes at most this many blocks, each alone
// on its SM, so that every rank's running kernel is resident at once with room for Stage1's
// clusters of two in any GPC (docs/ep.md).
unsigned loopback_share(const Device& device, int world);

}  // namespace megamoe
