// What a group's set-up and a rank's EP buffers read of the rank's options: RuntimeOptions's group
// fields, copied by the runtime (runtime/rank_options.hpp), so that ep/ reads no runtime type.
#pragma once
#include "megamoe/ep.hpp"

namespace megamoe {

struct GroupOptions {
  int world = 1;
  int rank = 0;
  Transport transport = Transport::loopback;
  AllGather all_gather;  // ipc, nvshmem
  int node_size = 0;     // nvshmem: the ranks of a node; 0: the whole group is one node
  int timeout_ms = 5000;
  int max_tokens = 8192;
  long long routed_rows_capacity = 0;  // 0: the worst case
};

}  // namespace megamoe
