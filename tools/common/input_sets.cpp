#include "common/input_sets.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/workload.hpp"

namespace megamoe::workload {

InputSets make_input_sets(Device& dev, const ModelShape& m, std::int64_t tokens, std::uint64_t seed) {
  const double set_bytes = double(tokens) * (4.0 * m.model_dim + 8.0 * m.topk);
  const int count = int(std::clamp(std::ceil(180e6 / set_bytes), 2.0, 64.0));
  InputSets out;
  std::mt19937_64 rng = inputs_rng(seed, tokens);
  std::set<int> touched;
  for (int i = 0; i < count; ++i) {
    Routing r = make_routing("uniform", tokens, m.topk, m.experts_per_rank, rng);
    std::vector<std::uint16_t> x = random_bf16(tokens, m.model_dim, rng);
    InputSet s{DeviceBuffer(dev, x.size() * 2), DeviceBuffer(dev, r.ids.size() * 4),
               DeviceBuffer(dev, r.weights.size() * 4), DeviceBuffer(dev, x.size() * 2)};
    dev.copy_to_device(s.x.get(), x.data(), x.size() * 2);
    dev.copy_to_device(s.ids.get(), r.ids.data(), r.ids.size() * 4);
    dev.copy_to_device(s.w.get(), r.weights.data(), r.weights.size() * 4);
    dev.fill_bytes(s.y.get(), 0xFF, s.y.bytes());
    if (i == 0)
      for (int id : r.ids) touched.insert(id), out.pairs += id >= 0;
    out.sets.push_back(std::move(s));
  }
  out.experts_touched = int(touched.size());
  return out;
}

}  // namespace megamoe::workload
