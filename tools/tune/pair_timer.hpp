// How megamoe-tune times: a bucket's calls captured in one graph per runtime (a call per input
// set, so the L2 holds none of them), replayed in turn with the incumbent's so that the clock's
// drift under the power limit falls on both alike; and the wait for the sustained clock before
// any of it counts.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/input_sets.hpp"
#include "megamoe/megamoe.hpp"

namespace megamoe::tune {

// A runtime's calls over the bench's input sets, captured as one graph (destroyed with it).
class CapturedCalls {
 public:
  CapturedCalls() = default;
  CapturedCalls(Device& dev, GraphHandle graph) : dev_(&dev), graph_(graph) {}
  CapturedCalls(CapturedCalls&& o) noexcept { *this = std::move(o); }
  CapturedCalls& operator=(CapturedCalls&& o) noexcept;
  ~CapturedCalls();
  GraphHandle graph() const { return graph_; }

 private:
  Device* dev_ = nullptr;
  GraphHandle graph_ = nullptr;
};

// The median of `v` (the upper one of an even count).
double median(std::vector<double> v);

struct PairTimes {
  double incumbent_ms = 0, candidate_ms = 0;  // medians, per call
  double ratio = 1;                           // candidate / incumbent: below 1 the candidate is faster
};

// One warm-up replay of each side, then `pairs` rounds of incumbent then candidate, each replay
// timed by its function (ms): the medians per call (a replay runs `calls` calls) and their ratio.
PairTimes time_interleaved(const std::function<double()>& incumbent, const std::function<double()>& candidate,
                           int pairs, int calls);

class PairTimer {
 public:
  // Input sets of `tokens` tokens for the shape (workload::make_input_sets) on `dev`.
  PairTimer(Device& dev, const ModelShape& m, std::int64_t tokens, std::uint64_t seed);
  ~PairTimer();
  PairTimer(const PairTimer&) = delete;
  PairTimer& operator=(const PairTimer&) = delete;

  std::int64_t tokens() const { return tokens_; }
  int calls() const { return int(inputs_.sets.size()); }

  // rt's call on every input set, captured (rt.prepare(tokens) first; it throws what forward throws).
  CapturedCalls capture(Runtime& rt, const PreparedWeights& w);

  // One warm-up replay of each, then `pairs` rounds of incumbent then candidate, each replay timed
  // with events: the medians per call and their ratio.
  PairTimes time_pair(const CapturedCalls& incumbent, const CapturedCalls& candidate, int pairs);

  // Replays `calls` until the card holds its sustained clock: windows of about 250 ms, until three
  // in a row are within 1% of each other's median and at least min_s have passed (at most max_s).
  // Returns how long it took; `how` says what was seen.
  double settle(const CapturedCalls& calls, double min_s, double max_s, std::string* how);

  // Replays `calls` for about `seconds` (the clock back under load after the host's pauses).
  void warm(const CapturedCalls& calls, double seconds);

 private:
  double replay_ms(const CapturedCalls& calls);  // one replay, timed

  Device& dev_;
  std::int64_t tokens_;
  workload::InputSets inputs_;
  StreamHandle stream_ = nullptr;
  EventHandle start_ = nullptr, stop_ = nullptr;
};

}  // namespace megamoe::tune
