#include "runtime/layer_outputs.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

#include "support/test_support.hpp"

namespace megamoe::test {

std::vector<std::uint16_t> layer_outputs(Runtime& rt, const PreparedWeights& weights, const workload::Routing& r,
                                         const std::vector<std::uint16_t>& x, std::int64_t tokens) {
  Device& dev = rt.device();
  const std::size_t bytes = std::max<std::size_t>(64, x.size() * 2);
  DeviceBuffer d_x(dev, bytes), d_ids(dev, r.ids.size() * 4 + 4), d_w(dev, r.weights.size() * 4 + 4), d_y(dev, bytes);
  dev.copy_to_device(d_x.get(), x.data(), x.size() * 2);
  dev.copy_to_device(d_ids.get(), r.ids.data(), r.ids.size() * 4);
  dev.copy_to_device(d_w.get(), r.weights.data(), r.weights.size() * 4);
  dev.fill_bytes(d_y.get(), 0xFF, d_y.bytes());
  rt.forward(weights, d_x.get(), static_cast<int*>(d_ids.get()), static_cast<float*>(d_w.get()), d_y.get(), tokens);
  CHECK_FALSE(rt.take_errors().any());
  std::vector<std::uint16_t> y(x.size());
  dev.copy_to_host(y.data(), d_y.get(), y.size() * 2);
  return y;
}

BitsDiff diff_bits(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  REQUIRE(a.size() == b.size());
  BitsDiff d;
  for (std::size_t i = 0; i < a.size(); ++i) d.differ += a[i] != b[i], d.nan += (a[i] & 0x7fff) > 0x7f80;
  return d;
}

}  // namespace megamoe::test
