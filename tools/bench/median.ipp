// Event-timed median of repeated work (included by ceilings.hpp).
#include <algorithm>
#include <vector>

namespace megamoe::bench {

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
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace megamoe::bench
