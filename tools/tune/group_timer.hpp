// How megamoe-tune times a group of ranks in one process (loopback or peer), for the dispatch
// knobs: each rank's burst of calls captured as a graph on its own stream, the ranks' graphs
// launched together, the slowest rank's time counted; pairs interleaved as PairTimer's are.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "common/input_sets.hpp"
#include "megamoe/megamoe.hpp"
#include "tune/pair_timer.hpp"

namespace megamoe::tune {

using Ranks = std::vector<std::unique_ptr<Runtime>>;
using RankWeights = std::vector<std::unique_ptr<PreparedWeights>>;

// A group's calls: one graph per rank.
struct GroupCalls {
  std::vector<CapturedCalls> ranks;
};

class GroupTimer {
 public:
  // Input sets of `tokens` tokens for each rank (uniform routing over the model's experts, a draw
  // of its own per rank), with a stream and events per rank, on devices[rank].
  GroupTimer(const std::vector<Device*>& devices, const ModelShape& model, std::int64_t tokens, std::uint64_t seed);
  ~GroupTimer();
  GroupTimer(const GroupTimer&) = delete;
  GroupTimer& operator=(const GroupTimer&) = delete;

  std::int64_t tokens() const { return tokens_; }
  int calls() const { return int(inputs_[0].sets.size()); }

  // Every rank's call on every input set, captured a graph per rank. One direct call on every rank
  // first: what it sets up, and its errors (thrown, naming the rank: dropped rows say to raise the
  // capacity, since the timed calls must move every row).
  GroupCalls capture(Ranks& ranks, const RankWeights& weights);

  // time_interleaved over the two groups' replays.
  PairTimes time_pair(const GroupCalls& incumbent, const GroupCalls& candidate, int pairs);
  void warm(const GroupCalls& calls, double seconds);

 private:
  double replay_ms(const GroupCalls& calls);  // every rank's graph launched, the slowest rank's time

  std::vector<Device*> devices_;
  std::int64_t tokens_;
  std::vector<workload::InputSets> inputs_;  // per rank
  std::vector<StreamHandle> streams_;
  std::vector<EventHandle> start_, stop_;
};

}  // namespace megamoe::tune
