// The run-time entry point on a GPU, end to end: config -> bucket -> cache or compile -> load
// -> launch, for each activation, checked element by element against the CPU reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "megamoe/megamoe.hpp"
#include "reference/activation_ref.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {

// A config file for an activation (the built-in ones cover silu and situv2 only).
std::string write_config(const test::TempDir& dir, const std::string& name, const std::string& activation,
                         bool bounds_check) {
  std::string text = R"({"schema": "megamoe-config/1", "name": ")" + name + R"(",
    "model": {"experts_per_rank": 4, "model_dim": 256, "inter_dim": 384, "topk": 2},
    "activation": )" + activation + R"(,
    "quant": {"activations": "fp8_e4m3", "weights": "mxfp4", "dispatch_wire": "fp8_e4m3_1x32"},
    "bucket_defaults": {"stage1": {"bm": 64, "bn": 128}, "stage2": {"bm": 64, "bn": 128},
      "dispatch": {"cus": 8, "persistent": true, "stride": 1}, "stage2_two_stage_b": false,
      "combine_wire": "bf16", "bounds_check": )" + (bounds_check ? "true" : "false") + R"(},
    "buckets": {"1": {"stage1": {"bm": 16}}, "64": {"stage1": {"bm": 32, "bn": 64}}}})";
  auto path = dir.path() / (name + ".json");
  test::write_text(path, text);
  return path.string();
}

// Runs the activation for each token count on fresh random data with a poisoned output and
// checks every element.
void check_activation(const std::string& config) {
  auto rt = Runtime::create(config);
  Device& dev = rt->device();
  const Activation& act = rt->config().activation;
  const int inter = rt->config().model.inter_dim;
  std::mt19937 rng(7);
  for (std::int64_t tokens : {1, 5, 64, 100, 1000}) {
    INFO("tokens " << tokens);
    std::vector<float> in(tokens * 2 * inter), out(tokens * inter);
    std::uniform_real_distribution<float> d(-10.f, 10.f);
    for (auto& x : in) x = d(rng);
    DeviceBuffer d_in(dev, in.size() * 4), d_out(dev, out.size() * 4 + 64), d_err(dev, 4);
    dev.copy_to_device(d_in.get(), in.data(), in.size() * 4);
    dev.fill_bytes(d_out.get(), 0xFF, d_out.bytes());  // NaN everywhere, 64 bytes past the end too
    dev.fill_bytes(d_err.get(), 0, 4);
    rt->activation(static_cast<float*>(d_in.get()), static_cast<float*>(d_out.get()), tokens, int(tokens),
                   static_cast<int*>(d_err.get()));
    dev.synchronize(nullptr);
    std::vector<unsigned char> raw(d_out.bytes());
    dev.copy_to_host(raw.data(), d_out.get(), raw.size());
    std::memcpy(out.data(), raw.data(), out.size() * 4);
    int bad = 0;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int c = 0; c < inter; ++c) {
        float ref = reference::activation(act, in[t * 2 * inter + c], in[t * 2 * inter + inter + c]);
        float got = out[t * inter + c];
        bool ok = std::isfinite(got) && std::fabs(got - ref) <= 1e-5f * std::fmax(1.f, std::fabs(ref));
        if (!ok && bad++ < 5) UNSCOPED_INFO("t " << t << " c " << c << ": got " << got << ", want " << ref);
      }
    CHECK(bad == 0);
    for (std::size_t i = out.size() * 4; i < raw.size(); ++i) REQUIRE(raw[i] == 0xFF);  // nothing past the end
  }
}

}  // namespace

TEST_CASE("the silu kernels match the CPU reference (generic_a8w4)", "[gpu][silu]") {
  check_activation("generic_a8w4");
}

TEST_CASE("the situv2 kernels match the CPU reference (kimi_k3_a8w4)", "[gpu][situv2]") {
  check_activation("kimi_k3_a8w4");
}

TEST_CASE("the swiglu kernels match the CPU reference", "[gpu][swiglu]") {
  test::TempDir dir;
  check_activation(write_config(dir, "test_swiglu", R"({"kind": "swiglu", "limit": 7.0})", false));
}

TEST_CASE("the checked build refuses rows beyond capacity and writes nothing", "[gpu][bounds]") {
  test::TempDir dir;
  auto rt = Runtime::create(write_config(dir, "test_checked", R"({"kind": "silu"})", true));
  Device& dev = rt->device();
  const int inter = rt->config().model.inter_dim;
  const int tokens = 40, capacity = 32;
  std::vector<float> in(tokens * 2 * inter, 1.f);
  DeviceBuffer d_in(dev, in.size() * 4), d_out(dev, tokens * inter * 4), d_err(dev, 4);
  dev.copy_to_device(d_in.get(), in.data(), in.size() * 4);
  dev.fill_bytes(d_out.get(), 0xFF, d_out.bytes());
  dev.fill_bytes(d_err.get(), 0, 4);
  rt->activation(static_cast<float*>(d_in.get()), static_cast<float*>(d_out.get()), tokens, capacity,
                 static_cast<int*>(d_err.get()));
  dev.synchronize(nullptr);
  int err = 0;
  dev.copy_to_host(&err, d_err.get(), 4);
  CHECK(err == 1);
  std::vector<unsigned char> raw(d_out.bytes());
  dev.copy_to_host(raw.data(), d_out.get(), raw.size());
  for (auto b : raw) REQUIRE(b == 0xFF);
}

TEST_CASE("zero tokens launch nothing and succeed", "[gpu]") {
  auto rt = Runtime::create("kimi_k3_a8w4");
  rt->activation(nullptr, nullptr, 0, 0, nullptr);
  rt->device().synchronize(nullptr);
}
