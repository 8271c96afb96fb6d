// megamoe-run: runs the MoE layer of a config on one GPU with fresh random inputs per batch
// size (the output poisoned before each call) and, with --check, compares the output with the
// CPU references (docs/layer.md, accuracy): PASS/FAIL per batch size.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/cli.hpp"
#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"

using namespace megamoe;

namespace {

const char* kUsage = R"(usage: megamoe-run --config NAME [--bs LIST] [--route KIND | --routing-file F] [--seed S]
                   [--check] [--ref-tokens N] [--save-routing F]

Runs the MoE layer of a config on GPU 0 (world size 1: every expert local) with fresh random
bf16 inputs and random MXFP4 weights, the output poisoned (NaN) before each call.
  --config NAME     built-in config name, or a path ending in .json
  --bs LIST         comma-separated token counts (default 1,8,128,1024,8192)
  --route KIND      uniform (default), single, sparse, holes, bad, ramp
  --routing-file F  replay a routing (ids and weights) from a file; its token count is the size
  --save-routing F  write the routing of the last size to F (replay it with --routing-file)
  --seed S          random seed (default 123): the weights come from it, each call's inputs from
                    it, the call's size and how many calls of that size came before
  --check           compare with the CPU references: relL2 against the exact (dequantized
                    weights, fp32) one must be <= 0.06; against the one that emulates the path's
                    quantizers and sums, <= 1e-3 over the call and <= 5e-3 for every token
                    (with an fp8 combine wire: 2.5e-3 and 2e-2)
  --ref-tokens N    references over at most N random tokens of a call (default 256: all of
                    a call up to bucket 256, as SPEC.md's relL2 is over the whole output)
  --path P          expert-GEMM kernels: auto (default), portable, tensor_core, hopper
Exit status: 0 on success, 1 on a failed check or error, 2 on bad usage, 3 when no GPU is present.
)";

constexpr const char* kTool = "megamoe-run";
[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error(kTool, msg); }
std::vector<std::int64_t> parse_list(const std::string& flag, const std::string& v) {
  return cli::parse_int_list(kTool, flag, v);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_name, route = "uniform", routing_file, save_routing;
  KernelPath path = KernelPath::automatic;
  std::vector<std::int64_t> sizes = {1, 8, 128, 1024, 8192};
  std::uint64_t seed = 123;
  std::size_t ref_tokens = 256;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&] { return cli::next_value(kTool, argc, argv, i); };
    if (s == "-h" || s == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    } else if (s == "--config") config_name = value();
    else if (s == "--bs") sizes = parse_list(s, value());
    else if (s == "--route") route = value();
    else if (s == "--routing-file") routing_file = value();
    else if (s == "--save-routing") save_routing = value();
    else if (s == "--seed") seed = std::uint64_t(parse_list(s, value()).at(0));
    else if (s == "--ref-tokens") ref_tokens = std::size_t(parse_list(s, value()).at(0));
    else if (s == "--check") check = true;
    else if (s == "--path") path = cli::parse_path(kTool, value());
    else usage_error("unknown argument '" + s + "'");
  }
  if (config_name.empty()) usage_error("--config NAME is required");
  if (sizes.empty()) usage_error("--bs needs at least one size");

  try {
    workload::Routing replay;
    if (!routing_file.empty()) {
      replay = workload::read_routing(routing_file);
      sizes = {replay.tokens};
    }
    RuntimeOptions options;
    options.max_tokens = int(std::max<std::int64_t>(1, *std::max_element(sizes.begin(), sizes.end())));
    options.profile = true;
    options.path = path;
    auto rt = Runtime::create(config_name, options);
    const Config& cfg = rt->config();
    const ModelShape& m = cfg.model;
    if (!routing_file.empty() && replay.topk != m.topk)
      throw Error(fmt::format("megamoe: routing file {} has topk {}, config {} has topk {}", routing_file, replay.topk,
                              cfg.name, m.topk));
    Device& dev = rt->device();
    fmt::print("config {}: {} experts, model_dim {}, inter_dim {}, topk {}, {} on {} ({})\n", cfg.name,
               m.experts_per_rank, m.model_dim, m.inter_dim, m.topk, to_string(cfg.activation.kind), dev.name(),
               dev.arch());
    fmt::print("kernels: {} path; routing: {}; references: over at most {} random tokens of each call\n",
               to_string(rt->path()), routing_file.empty() ? route : "file " + routing_file, ref_tokens);
    Mxfp4ExpertWeights weights = workload::random_weights(m, seed);
    auto prepared = rt->prepare_weights(weights);

    fmt::print("{:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>10} {:>10} {:>7} {:>6}\n", "tokens",
               "bucket", "route_us", "quant_us", "stage1_us", "stage2_us", "combine_us", "total_us", "relL2_ref",
               "relL2_emu", "worst_tok", "checked", "result");
    int failures = 0;
    std::map<std::int64_t, int> draws;  // a size listed again gets fresh inputs
    for (std::int64_t tokens : sizes) {
      std::mt19937_64 rng = workload::inputs_rng(seed, tokens, draws[tokens]++);
      workload::Routing r = routing_file.empty() ? workload::make_routing(route, tokens, m.topk, m.experts_per_rank, rng)
                                                 : replay;
      std::vector<std::uint16_t> x = workload::random_bf16(tokens, m.model_dim, rng);
      std::size_t xy_bytes = std::max<std::size_t>(2, x.size() * 2);
      DeviceBuffer d_x(dev, xy_bytes), d_y(dev, xy_bytes), d_ids(dev, std::max<std::size_t>(4, r.ids.size() * 4)),
          d_w(dev, std::max<std::size_t>(4, r.weights.size() * 4));
      dev.copy_to_device(d_x.get(), x.data(), x.size() * 2);
      dev.copy_to_device(d_ids.get(), r.ids.data(), r.ids.size() * 4);
      dev.copy_to_device(d_w.get(), r.weights.data(), r.weights.size() * 4);
      auto call = [&] {
        dev.fill_bytes(d_y.get(), 0xFF, d_y.bytes());  // NaN poison: an unwritten element fails the check
        rt->forward(*prepared, d_x.get(), static_cast<int*>(d_ids.get()), static_cast<float*>(d_w.get()), d_y.get(),
                    tokens);
      };
      call();  // warm-up: builds or loads the bucket's kernels
      call();
      StageTimes t = tokens ? rt->last_stage_times() : StageTimes{};
      CallErrors errors = rt->take_errors();
      std::vector<std::uint16_t> y(x.size());
      dev.copy_to_host(y.data(), d_y.get(), y.size() * 2);
      bool ok = errors.bad_ids == 2LL * r.planted_bad_ids && errors.bounds_violations == 0;  // two calls
      std::string verdict = "ran";
      workload::CheckResult c;
      if (check && tokens > 0) {
        c = workload::check_layer(cfg, weights, x, r, y, ref_tokens, rng, rt->arithmetic());
        ok = ok && c.pass();
        verdict = ok ? "PASS" : "FAIL";
      } else if (check) {
        verdict = ok ? "PASS" : "FAIL";
      }
      failures += !ok;
      fmt::print("{:>6} {:>6} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f} {:>9.1f} {:>10.3e} {:>10.3e} {:>10.3e} {:>7} {:>6}\n",
                 tokens, cfg.bucket_for_tokens(tokens).bucket, t.route_ms * 1e3, t.quantize_ms * 1e3,
                 t.stage1_ms * 1e3, t.stage2_ms * 1e3, t.combine_ms * 1e3, t.total_ms * 1e3, c.rel_l2_exact,
                 c.rel_l2_emulated, c.worst_token_emulated,
                 fmt::format("{}{}", c.checked_tokens, c.subset ? "*" : ""), verdict);
      if (c.unwritten) fmt::print("  {} output elements were never written\n", c.unwritten);
      if (errors.any())
        fmt::print("  kernels reported {} bad ids (first at slot {}), {} bounds violations\n", errors.bad_ids,
                   errors.first_bad_slot, errors.bounds_violations);
      std::fflush(stdout);  // a row as soon as it is known, also into a pipe (a run cut short keeps its rows)
      if (!save_routing.empty()) workload::write_routing(r, save_routing);
    }
    fmt::print("checked: tokens compared with the references (* a random subset); worst_tok: the largest relL2 of\n"
               "one token's row against the emulating reference\n");
    return failures ? 1 : 0;
  } catch (const NoGpuError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
