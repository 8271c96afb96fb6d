// megamoe-bench over several ranks of one process (loopback or peer): per batch size, the fused
// and the serial call's time per rank, side by side on the same inputs, their ratio, and the
// floor of the slowest rank with fused / floor; over peer, the copy rate from GPU 0 to GPU 1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "megamoe/runtime.hpp"

namespace megamoe::bench {

struct GroupBenchOptions {
  Config config;
  std::string json;
  std::string table;  // RuntimeOptions::bucket_table
  KernelPath path = KernelPath::automatic;
  Transport transport = Transport::loopback;
  int world = 2, reps = 20;
  std::uint64_t seed = 123;
  std::vector<std::int64_t> sizes;
};

int run_group_bench(const GroupBenchOptions& o);

}  // namespace megamoe::bench
