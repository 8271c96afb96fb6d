#include "tune/pair_timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace megamoe::tune {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CapturedCalls& CapturedCalls::operator=(CapturedCalls&& o) noexcept {
  if (this != &o) {
    if (dev_ && graph_) dev_->destroy_graph(graph_);
    dev_ = o.dev_, graph_ = o.graph_;
    o.dev_ = nullptr, o.graph_ = nullptr;
  }
  return *this;
}

CapturedCalls::~CapturedCalls() {
  if (dev_ && graph_) dev_->destroy_graph(graph_);
}

PairTimer::PairTimer(Device& dev, const ModelShape& m, std::int64_t tokens, std::uint64_t seed)
    : dev_(dev), tokens_(tokens), inputs_(workload::make_input_sets(dev, m, tokens, seed)) {
  stream_ = dev_.create_stream();
  start_ = dev_.create_event(), stop_ = dev_.create_event();
}

PairTimer::~PairTimer() {
  dev_.destroy_event(start_), dev_.destroy_event(stop_);
  dev_.destroy_stream(stream_);
}

CapturedCalls PairTimer::capture(Runtime& rt, const PreparedWeights& w) {
  rt.prepare(tokens_);
  auto call = [&](const workload::InputSet& s) {
    rt.forward(w, s.x.get(), static_cast<const int*>(s.ids.get()), static_cast<const float*>(s.w.get()), s.y.get(),
               tokens_, stream_);
  };
  call(inputs_.sets[0]);  // once outside the capture: what the first call sets up, and its errors
  dev_.synchronize(stream_);
  dev_.begin_capture(stream_);
  for (const workload::InputSet& s : inputs_.sets) call(s);
  return CapturedCalls(dev_, dev_.end_capture(stream_));
}

double PairTimer::replay_ms(const CapturedCalls& calls) {
  dev_.record(start_, stream_);
  dev_.launch_graph(calls.graph(), stream_);
  dev_.record(stop_, stream_);
  dev_.synchronize(stream_);
  return dev_.elapsed_ms(start_, stop_);
}

PairTimes time_interleaved(const std::function<double()>& incumbent, const std::function<double()>& candidate,
                           int pairs, int calls) {
  incumbent(), candidate();
  std::vector<double> a, b;
  for (int i = 0; i < pairs; ++i) a.push_back(incumbent()), b.push_back(candidate());
  PairTimes t;
  t.incumbent_ms = median(a) / calls, t.candidate_ms = median(b) / calls;
  t.ratio = t.candidate_ms / t.incumbent_ms;
  return t;
}

PairTimes PairTimer::time_pair(const CapturedCalls& incumbent, const CapturedCalls& candidate, int pairs) {
  return time_interleaved([&] { return replay_ms(incumbent); }, [&] { return replay_ms(candidate); }, pairs, calls());
}

double PairTimer::settle(const CapturedCalls& calls, double min_s, double max_s, std::string* how) {
  const auto t0 = std::chrono::steady_clock::now();
  const int per_window = int(std::clamp(std::ceil(250.0 / replay_ms(calls)), 1.0, 1e5));
  std::vector<double> windows;  // median replay time of each window
  for (;;) {
    std::vector<double> w;
    for (int i = 0; i < per_window; ++i) w.push_back(replay_ms(calls));
    windows.push_back(median(w));
    const double s = seconds_since(t0);
    bool steady = windows.size() >= 3;
    for (std::size_t i = windows.size() >= 3 ? windows.size() - 3 : 0; steady && i < windows.size(); ++i)
      steady = std::fabs(windows[i] / windows.back() - 1) <= 0.01;
    if ((steady && s >= min_s) || s >= max_s) {
      if (how)
        *how = fmt::format("{} after {:.1f} s: a replay {:.3f} ms in the first window, {:.3f} ms in the last{}",
                           steady ? "steady" : "not steady within 1%", s, windows.front(), windows.back(),
                           steady ? "" : " (timing goes on: each candidate is still timed beside the incumbent)");
      return s;
    }
  }
}

void PairTimer::warm(const CapturedCalls& calls, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < seconds) replay_ms(calls);
}

}  // namespace megamoe::tune
