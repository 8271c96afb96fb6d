// megamoe-run: runs a config's workload on the GPU with fresh random inputs per batch size,
// the output poisoned before each call, and with --check compares every element against the
// CPU reference. Until the MoE layer lands the workload is the tile-wise activation.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "megamoe/megamoe.hpp"
#include "reference/activation_ref.hpp"

using namespace megamoe;

namespace {

const char* kUsage = R"(usage: megamoe-run --config NAME [--bs LIST] [--seed S] [--check] [--backend cuda|hip]

  --config NAME  built-in config name, or a path ending in .json
  --bs LIST      comma-separated token counts (default 1,8,128,1024,8192)
  --seed S       random seed (default 123)
  --check        compare every output element with the CPU reference; PASS/FAIL per size
Exit status: 0 on success, 1 on a failed check or error, 2 on bad usage, 3 when no GPU is present.
)";

[[noreturn]] void usage_error(const std::string& msg) {
  fmt::print(stderr, "megamoe-run: {}\n(see --help)\n", msg);
  std::exit(2);
}

std::vector<std::int64_t> parse_list(const std::string& s) {
  std::vector<std::int64_t> v;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    std::string item = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    try {
      std::size_t used = 0;
      v.push_back(std::stoll(item, &used));
      if (used != item.size()) throw 0;
    } catch (...) {
      usage_error(fmt::format("--bs expects comma-separated integers, got '{}'", s));
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_name, backend = "cuda";
  std::vector<std::int64_t> sizes = {1, 8, 128, 1024, 8192};
  unsigned seed = 123;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(s + " needs a value");
      return argv[++i];
    };
    if (s == "-h" || s == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    } else if (s == "--config") config_name = value();
    else if (s == "--bs") sizes = parse_list(value());
    else if (s == "--seed") seed = unsigned(parse_list(value()).at(0));
    else if (s == "--check") check = true;
    else if (s == "--backend") backend = value();
    else usage_error("unknown argument '" + s + "'");
  }
  if (config_name.empty()) usage_error("--config NAME is required");

  try {
    auto rt = Runtime::create(config_name, {backend_from_name(backend), 0});
    Device& dev = rt->device();
    const Config& cfg = rt->config();
    const int inter = cfg.model.inter_dim;
    fmt::print("config {} on {} ({}), activation {}\n", cfg.name, dev.name(), dev.arch(), to_string(cfg.activation.kind));
    fmt::print("{:>6} {:>6} {:>12} {:>12} {:>8}\n", "tokens", "bucket", "kernel_us", "max_rel_err", "result");
    std::mt19937 rng(seed);
    int failures = 0;
    EventHandle start = dev.create_event(), stop = dev.create_event();
    for (std::int64_t tokens : sizes) {
      const BucketConfig& bucket = cfg.bucket_for_tokens(tokens);
      std::vector<float> in(std::size_t(tokens) * 2 * inter), out(std::size_t(tokens) * inter);
      std::uniform_real_distribution<float> dist(-8.f, 8.f);
      for (auto& x : in) x = dist(rng);  // fresh inputs for every size
      DeviceBuffer d_in(dev, in.size() * 4), d_out(dev, out.size() * 4), d_err(dev, 4);
      dev.copy_to_device(d_in.get(), in.data(), in.size() * 4);
      dev.fill_bytes(d_out.get(), 0xFF, out.size() * 4);  // NaN poison: an unwritten element fails
      dev.fill_bytes(d_err.get(), 0, 4);
      rt->prepare(tokens);
      auto run = [&] {
        rt->activation(static_cast<const float*>(d_in.get()), static_cast<float*>(d_out.get()), tokens,
                       int(bucket.bucket), static_cast<int*>(d_err.get()));
      };
      run();  // warm-up (module load)
      dev.fill_bytes(d_out.get(), 0xFF, out.size() * 4);
      dev.record(start, nullptr);
      run();
      dev.record(stop, nullptr);
      dev.synchronize(nullptr);
      float ms = dev.elapsed_ms(start, stop);
      dev.copy_to_host(out.data(), d_out.get(), out.size() * 4);
      int err = 0;
      dev.copy_to_host(&err, d_err.get(), 4);
      double worst = 0;
      bool ok = err == 0;
      if (check) {
        for (std::int64_t t = 0; t < tokens; ++t)
          for (int c = 0; c < inter; ++c) {
            float ref = reference::activation(cfg.activation, in[t * 2 * inter + c], in[t * 2 * inter + inter + c]);
            float got = out[t * inter + c];
            double rel = std::fabs(double(got) - ref) / std::max(1e-3, std::fabs(double(ref)));
            if (!std::isfinite(got) || rel > 1e-4) ok = false;
            worst = std::isfinite(got) ? std::max(worst, rel) : INFINITY;
          }
      }
      failures += !ok;
      fmt::print("{:>6} {:>6} {:>12.1f} {:>12.2e} {:>8}\n", tokens, bucket.bucket, ms * 1e3, worst,
                 check ? (ok ? "PASS" : "FAIL") : (err ? "ERROR" : "ran"));
    }
    dev.destroy_event(start);
    dev.destroy_event(stop);
    return failures ? 1 : 0;
  } catch (const NoGpuError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
