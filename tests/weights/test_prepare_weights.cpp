// prepare_weights with shared experts, on a device of host memory: the caller's routed experts
// then shared ones land in the kernels' slot order (the shared ones first) on every path, byte for
// byte what the same experts given in that order to a model without shared experts give; a
// replacement is uploaded as given.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/runtime.hpp"
#include "support/host_memory_device.hpp"
#include "support/normal_weights.hpp"
#include "weights/prepare_weights.hpp"

using namespace megamoe;

namespace {

// 4 routed experts of 256 x 128, every bucket reading the fp8-resident copy too (Hopper).
Config small_config(int experts) {
  return config_for_world(
      parse_config(R"({"schema": "megamoe-config/2", "name": "t",
        "model": {"experts": )" + std::to_string(experts) + R"(, "model_dim": 256, "inter_dim": 128, "topk": 2},
        "activation": {"kind": "silu"}, "quant": {"activations": "fp8_e4m3", "weights": "mxfp4"},
        "bucket_defaults": {"stage1": {"token_tile": 64}, "stage2": {"token_tile": 64},
          "dispatch": {"cus": 8, "persistent": false, "stride": 1}, "combine_wire": "bf16",
          "weights": "fp8_resident", "bounds_check": false},
        "buckets": {}})",
                   "t.json"),
      1);
}

std::vector<unsigned char> bytes_of(const DeviceBuffer& b) {
  std::vector<unsigned char> v(b.bytes());
  if (b.get()) std::memcpy(v.data(), b.get(), v.size());
  return v;
}

void require_same(const PreparedWeights& a, const PreparedWeights& b) {
  REQUIRE(a.experts == b.experts);
  for (auto buffer : {&PreparedWeights::w1_packed, &PreparedWeights::w1_scales, &PreparedWeights::w2_packed,
                      &PreparedWeights::w2_scales, &PreparedWeights::w1_units, &PreparedWeights::w1_row_scale,
                      &PreparedWeights::w2_units, &PreparedWeights::w2_row_scale, &PreparedWeights::w1_resident,
                      &PreparedWeights::w2_resident, &PreparedWeights::b1, &PreparedWeights::b2})
    CHECK(bytes_of(a.*buffer) == bytes_of(b.*buffer));
}

}  // namespace

TEST_CASE("prepare_weights puts a rank's shared experts first, as the kernels' slots hold them", "[weights][shared]") {
  test::HostMemoryDevice dev;
  const Config plain = small_config(4 + 2), shared = with_shared_experts(small_config(4), 2);
  REQUIRE(shared.model.experts_per_rank == 4);
  const Mxfp4ExpertWeights w = test::normal_expert_weights(6, 256, 128, 9, 0.1f, false);  // routed 0..3, shared 4, 5
  const Mxfp4ExpertWeights slot_order = gather_experts(w, {4, 5, 0, 1, 2, 3});
  for (KernelPath path : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper}) {
    INFO(to_string(path));
    const auto got = prepare_weights(dev, shared, path, 64, w);
    const auto want = prepare_weights(dev, plain, path, 64, slot_order);
    require_same(*got, *want);
    if (path == KernelPath::hopper) CHECK(got->resident_bytes > 0);
    // A replacement is any count of experts, uploaded as given.
    require_same(*prepare_weights(dev, shared, path, 64, gather_experts(w, {5, 1}), true),
                 *prepare_weights(dev, plain, path, 64, gather_experts(w, {5, 1}), true));
  }
}

TEST_CASE("weights_bytes states what prepare_weights allocates, on every path", "[weights][workspace]") {
  test::HostMemoryDevice dev;
  // 192 is no multiple of 128: the tensor-core and Hopper paths hold the weights padded to 256.
  for (const bool biases : {false, true})
    for (const char* source : {"mxfp4", "fp8_resident"})
      for (KernelPath path : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper}) {
        INFO(to_string(path) << ", biases " << biases << ", weights " << source);
        const Config config = config_for_world(
            parse_config(std::string(R"({"schema": "megamoe-config/2", "name": "t",
              "model": {"experts": 3, "model_dim": 192, "inter_dim": 128, "topk": 2, "expert_biases": )") +
                             (biases ? "true" : "false") + R"(},
              "activation": {"kind": "silu"}, "quant": {"activations": "fp8_e4m3", "weights": "mxfp4"},
              "bucket_defaults": {"stage1": {"token_tile": 64}, "stage2": {"token_tile": 64},
                "dispatch": {"cus": 8, "persistent": false, "stride": 1}, "combine_wire": "bf16",
                "weights": ")" + source + R"(", "bounds_check": false},
              "buckets": {}})",
                         "t.json"),
            1);
        RuntimeOptions o;
        o.max_tokens = 64, o.path = path;
        Config held = config;
        settle_weight_sources(held, path, o.fp8_resident_weights);
        const auto got = prepare_weights(dev, held, path, 64, test::normal_expert_weights(3, 192, 128, 4, 0.1f, biases));
        CHECK(got->bytes() == prepared_weights_bytes(held, path, 64));
        CHECK(Runtime::weights_bytes(config, o) == got->bytes());
        if (path == KernelPath::portable)  // v1 by hand: 4 bits a value and a scale byte per 32, both matrices
          CHECK(got->bytes() == 3 * (3 * 192 * 128) * 17 / 32 + (biases ? 3 * (2 * 128 + 192) * 4 : 0));
        CHECK((got->resident_bytes > 0) == (path == KernelPath::hopper && std::string(source) == "fp8_resident"));
      }
}
