// The group a rank belongs to: the transport, the ranks, and how the host side meets the others
// (the ipc transport's all-gather; in one process, the other ranks' runtimes themselves).
#pragma once
#include <vector>

#include "megamoe/ep.hpp"

namespace megamoe {

class Runtime;

struct Group {
  Transport transport = Transport::loopback;
  int world = 1;
  AllGather all_gather;          // ipc
  std::vector<Runtime*> ranks;   // loopback and peer: every rank of the process, by rank
  int loopback_share = 0;        // loopback: blocks per SM-exclusive grid of each rank (docs/ep.md)

  bool in_process() const { return transport != Transport::ipc; }
  // ipc: returns once every rank has called it.
  void barrier() const { all_gather(std::vector<std::uint8_t>(1, 0)); }
};

}  // namespace megamoe
