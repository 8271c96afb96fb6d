#include "runtime/layer_outputs.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

#include "support/test_support.hpp"

namespace megamoe::test {

CallBuffers upload_call(Device& dev, const std::vector<std::uint16_t>& x, const workload::Routing& r,
                        std::size_t past_y) {
  const std::size_t bytes = std::max<std::size_t>(64, x.size() * 2);
  CallBuffers b{DeviceBuffer(dev, bytes), DeviceBuffer(dev, r.ids.size() * 4 + 4),
                DeviceBuffer(dev, r.weights.size() * 4 + 4), DeviceBuffer(dev, bytes + past_y)};
  dev.copy_to_device(b.x.get(), x.data(), x.size() * 2);
  dev.copy_to_device(b.ids.get(), r.ids.data(), r.ids.size() * 4);
  dev.copy_to_device(b.weights.get(), r.weights.data(), r.weights.size() * 4);
  dev.fill_bytes(b.y.get(), 0xFF, b.y.bytes());
  return b;
}

std::vector<std::uint16_t> layer_outputs(Runtime& rt, const PreparedWeights& weights, const workload::Routing& r,
                                         const std::vector<std::uint16_t>& x, std::int64_t tokens) {
  Device& dev = rt.device();
  const CallBuffers b = upload_call(dev, x, r);
  rt.forward(weights, b.x.get(), static_cast<int*>(b.ids.get()), static_cast<float*>(b.weights.get()), b.y.get(),
             tokens);
  CHECK_FALSE(rt.take_errors().any());
  std::vector<std::uint16_t> y(x.size());
  dev.copy_to_host(y.data(), b.y.get(), y.size() * 2);
  return y;
}

BitsDiff diff_bits(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  REQUIRE(a.size() == b.size());
  BitsDiff d;
  for (std::size_t i = 0; i < a.size(); ++i) d.differ += a[i] != b[i], d.nan += (a[i] & 0x7fff) > 0x7f80;
  return d;
}

}  // namespace megamoe::test
