#include "tune/group_timer.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace megamoe::tune {

GroupTimer::GroupTimer(const std::vector<Device*>& devices, const ModelShape& model, std::int64_t tokens,
                       std::uint64_t seed)
    : devices_(devices), tokens_(tokens) {
  ModelShape routed = model;  // ids over the group's experts
  routed.experts_per_rank = routed.experts;
  for (std::size_t r = 0; r < devices_.size(); ++r) {
    Device& d = *devices_[r];
    inputs_.push_back(workload::make_input_sets(d, routed, tokens, seed + 1000003ull * r));
    streams_.push_back(d.create_stream());
    start_.push_back(d.create_event()), stop_.push_back(d.create_event());
  }
}

GroupTimer::~GroupTimer() {
  for (std::size_t r = 0; r < devices_.size(); ++r) {
    devices_[r]->destroy_event(start_[r]), devices_[r]->destroy_event(stop_[r]);
    devices_[r]->destroy_stream(streams_[r]);
  }
}

GroupCalls GroupTimer::capture(Ranks& ranks, const RankWeights& weights) {
  auto call = [&](std::size_t r, const workload::InputSet& s) {
    ranks[r]->forward(*weights[r], s.x.get(), static_cast<const int*>(s.ids.get()),
                      static_cast<const float*>(s.w.get()), s.y.get(), tokens_, streams_[r]);
  };
  for (auto& rt : ranks) rt->prepare(tokens_);
  for (std::size_t r = 0; r < ranks.size(); ++r) call(r, inputs_[r].sets[0]);
  for (std::size_t r = 0; r < ranks.size(); ++r) devices_[r]->synchronize(streams_[r]);
  for (auto& rt : ranks) {
    const CallErrors e = rt->take_errors();
    if (e.dropped_rows)
      throw Error(fmt::format("megamoe-tune: rank {} dropped {} routed rows at {} tokens a rank: the group's "
                              "routed_rows_capacity is too small for the timed calls",
                              rt->rank(), e.dropped_rows, tokens_));
    if (e.any())
      throw Error(fmt::format("megamoe-tune: rank {}: the kernels reported {} bad ids and {} bounds violations",
                              rt->rank(), e.bad_ids, e.bounds_violations));
  }
  GroupCalls g;  // captures launch nothing: the ranks' waits on each other happen at replay
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    devices_[r]->begin_capture(streams_[r]);
    for (const workload::InputSet& s : inputs_[r].sets) call(r, s);
    g.ranks.emplace_back(*devices_[r], devices_[r]->end_capture(streams_[r]));
  }
  return g;
}

double GroupTimer::replay_ms(const GroupCalls& calls) {
  for (std::size_t r = 0; r < devices_.size(); ++r) {
    devices_[r]->record(start_[r], streams_[r]);
    devices_[r]->launch_graph(calls.ranks[r].graph(), streams_[r]);
    devices_[r]->record(stop_[r], streams_[r]);
  }
  double worst = 0;
  for (std::size_t r = 0; r < devices_.size(); ++r) {
    devices_[r]->synchronize(streams_[r]);
    worst = std::max(worst, double(devices_[r]->elapsed_ms(start_[r], stop_[r])));
  }
  return worst;
}

PairTimes GroupTimer::time_pair(const GroupCalls& incumbent, const GroupCalls& candidate, int pairs) {
  return time_interleaved([&] { return replay_ms(incumbent); }, [&] { return replay_ms(candidate); }, pairs, calls());
}

void GroupTimer::warm(const GroupCalls& calls, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) replay_ms(calls);
}

}  // namespace megamoe::tune
