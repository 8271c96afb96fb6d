// The plan of one call over a group, computed on the host from every rank's ids alone (docs/ep.md):
// which ranks each token goes to and at which receive-buffer row, how many rows each rank sends
// each expert, and how each rank lays out what it receives. route_ep computes the same on the
// device; the order of a source's rows within an (expert, source) segment is the slots' order
// here, the kernel's block order there (the tests compare the layout's offsets, which the order
// does not move, and the set of rows in each segment).
#pragma once
#include <cstdint>
#include <vector>

namespace megamoe {

struct RankPlan {
  // As a source:
  std::vector<int> dest_row;      // [tokens][world]: the token's row in rank d's receive buffer, -1 if none
  std::vector<int> sent;          // [world][experts + 1]: rows sent to rank d per local expert, then tokens
  std::vector<long long> placed;  // [tokens * topk]: the slot's receiver * 2^32 + routed row there; -1 none
  long long bad_ids = 0;
  // As a receiver:
  std::vector<int> expert_offsets;  // [experts + 1], capped at the capacity
  std::vector<int> segment;         // [experts][world]: the first routed row of (expert, source), uncapped
  std::vector<int> segment_rows;    // [experts][world]: its rows within the capacity
  long long dropped = 0;            // rows past the capacity
};

// ids[r]: rank r's [tokens_r][topk] global ids (-1 empty; outside [0, world x experts) bad).
std::vector<RankPlan> dispatch_plan(const std::vector<std::vector<int>>& ids, int topk, int experts,
                                    long long capacity);

}  // namespace megamoe
