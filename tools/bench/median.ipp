// Event-timed median of repeated work (included by ceilings.hpp).
#include <algorithm>
#include <cmath>
#include <vector>

namespace megamoe::bench {

// The middle value of a sample (the upper middle one of an even count).
inline float median(std::vector<float> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

template <class Work>
float median_ms(Device& dev, StreamHandle stream, int warmup, int reps, Work&& work) {
  for (int i = 0; i < warmup; ++i) work();
  EventHandle start = dev.create_event(), stop = dev.create_event();
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    dev.record(start, stream);
    work();
    dev.record(stop, stream);
    dev.synchronize(stream);
    ms.push_back(dev.elapsed_ms(start, stop));
  }
  dev.destroy_event(start);
  dev.destroy_event(stop);
  return median(std::move(ms));
}

template <class Work>
RunTimes burst_and_sustained_ms(Device& dev, StreamHandle stream, double warm_s, Work&& work) {
  RunTimes t;
  t.burst_ms = median_ms(dev, stream, 3, 10, work);
  const int warm = int(std::min(1e6, std::ceil(warm_s * 1e3 / t.burst_ms)));
  const int batch = int(std::clamp(std::ceil(50.0 / t.burst_ms), 1.0, 1e6));
  for (int i = 0; i < warm; ++i) work();
  t.sustained_ms = median_ms(dev, stream, 0, 10, [&] {
                     for (int i = 0; i < batch; ++i) work();
                   }) /
                   batch;
  return t;
}

}  // namespace megamoe::bench
