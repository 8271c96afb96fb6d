// A model's MoE layers through one Runtime: each layer holds only its weights (a PreparedWeights),
// every call goes through the runtime's one workspace. Layers chained as a model runs them (layer
// l's output is layer l + 1's input), captured in one graph and replayed on new inputs, each
// layer's output against its own references; and over loopback ranks, one group serving two
// layers' calls back to back.
#include <catch2/catch.hpp>

#include <random>

#include <fmt/format.h>

#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/layer_outputs.hpp"
#include "runtime/slot_group.hpp"

using namespace megamoe;

namespace {

std::vector<std::uint16_t> download(Device& dev, const DeviceBuffer& b, std::size_t values) {
  std::vector<std::uint16_t> v(values);
  dev.copy_to_host(v.data(), b.get(), values * 2);
  return v;
}

}  // namespace

TEST_CASE("several layers share one runtime: chained in one captured graph, each against its references",
          "[gpu][layers][graph]") {
  constexpr int kLayers = 3;
  constexpr std::int64_t kTokens = 96;
  RuntimeOptions o;
  o.max_tokens = 256;
  auto rt = Runtime::create(workload::load_for_world("qwen3_235b_a8w4", 1, 16), o);
  const Config& cfg = rt->config();
  const ModelShape& m = cfg.model;
  Device& dev = rt->device();
  std::vector<Mxfp4ExpertWeights> host;
  std::vector<std::unique_ptr<PreparedWeights>> layers;
  for (int l = 0; l < kLayers; ++l) {
    host.push_back(workload::random_weights(m, 100 + l));
    layers.push_back(rt->prepare_weights(host.back()));
  }
  const WorkspaceBytes before = rt->workspace_bytes();
  std::mt19937_64 rng(17);
  // act[l] is layer l's input, act[l + 1] its output; each layer its own routing.
  std::vector<DeviceBuffer> act;
  for (int l = 0; l <= kLayers; ++l) act.emplace_back(dev, std::size_t(kTokens) * m.model_dim * 2);
  std::vector<workload::Routing> routes;
  std::vector<test::CallBuffers> route_bufs;
  for (int l = 0; l < kLayers; ++l) {
    routes.push_back(workload::make_routing("uniform", kTokens, m.topk, m.experts_per_rank, rng));
    route_bufs.push_back(test::upload_call(dev, std::vector<std::uint16_t>(std::size_t(kTokens) * m.model_dim), routes.back()));
  }
  StreamHandle s = dev.create_stream();
  rt->prepare(kTokens);
  dev.begin_capture(s);
  for (int l = 0; l < kLayers; ++l)
    rt->forward(*layers[l], act[l].get(), static_cast<const int*>(route_bufs[l].ids.get()),
                static_cast<const float*>(route_bufs[l].weights.get()), act[l + 1].get(), kTokens, s);
  GraphHandle g = dev.end_capture(s);
  for (int replay = 0; replay < 2; ++replay) {
    // Fresh model inputs; every layer's output poisoned.
    std::vector<std::uint16_t> x0 = workload::random_bf16(kTokens, m.model_dim, rng);
    dev.copy_to_device(act[0].get(), x0.data(), x0.size() * 2);
    for (int l = 1; l <= kLayers; ++l) dev.fill_bytes(act[l].get(), 0xFF, act[l].bytes());
    dev.launch_graph(g, s);
    dev.synchronize(s);
    CHECK_FALSE(rt->take_errors().any());
    for (int l = 0; l < kLayers; ++l) {
      INFO("replay " << replay << ", layer " << l);
      const auto x = download(dev, act[l], x0.size()), y = download(dev, act[l + 1], x0.size());
      const workload::CheckResult res = workload::check_layer(cfg, host[l], x, routes[l], y, kTokens, rng,
                                                              rt->arithmetic(kTokens));
      fmt::print("  layer {} of {} through one runtime, replay {}: relL2 exact {:.3e}, emulated {:.3e}, worst token "
                 "{:.3e}\n", l, kLayers, replay, res.rel_l2_exact, res.rel_l2_emulated, res.worst_token_emulated);
      CHECK(res.unwritten == 0);
      CHECK(res.rel_l2_exact <= workload::kExactBar);
      CHECK(res.rel_l2_emulated <= res.bars.call);
      CHECK(res.worst_token_emulated <= res.bars.token);
      // The check tells the layers apart: another layer's weights miss the exact bar by far.
      const workload::CheckResult other = workload::check_layer(cfg, host[(l + 1) % kLayers], x, routes[l], y, 32, rng,
                                                                rt->arithmetic(kTokens));
      CHECK(other.rel_l2_exact > 0.5);
    }
  }
  CHECK(rt->workspace_bytes().total() == before.total());  // no layer added to the workspace
  std::size_t weights = 0;
  for (const auto& w : layers) weights += w->bytes();
  RuntimeOptions planned = o;
  planned.path = rt->path();
  CHECK(weights == kLayers * Runtime::weights_bytes(workload::load_for_world("qwen3_235b_a8w4", 1, 16), planned));
  dev.destroy_graph(g);
  dev.destroy_stream(s);
}

TEST_CASE("EP loopback: one group serves two layers' calls back to back", "[gpu][layers][ep]") {
  test::SlotGroup group(workload::load_for_world("qwen3_235b_a8w4", 2, 16), 2, 128);
  const ModelShape& m = group.model();
  const std::vector<int> slots = test::iota(m.experts);
  ModelShape whole = m;  // random_weights draws experts_per_rank experts: a pool holds every expert of the group
  whole.experts_per_rank = m.experts;
  const std::vector<Mxfp4ExpertWeights> pools = {workload::random_weights(whole, 7), workload::random_weights(whole, 8)};
  std::vector<std::vector<std::unique_ptr<PreparedWeights>>> layers;
  for (const auto& p : pools) layers.push_back(group.prepare(p, slots));
  std::mt19937_64 rng(23);
  for (std::int64_t tokens : {1, 64, 128}) {
    // Layer 0, layer 1, layer 0 again: three calls of the group, no host sync between them.
    std::vector<std::vector<test::SlotCall>> calls(3);
    for (int c = 0; c < 3; ++c)
      for (int r = 0; r < group.world(); ++r)
        calls[c].push_back(group.input(r, workload::make_routing("uniform", tokens, m.topk, m.experts, rng), slots, rng));
    for (int c = 0; c < 3; ++c) group.launch(calls[c], layers[c % 2]);
    for (int c = 0; c < 3; ++c)
      group.check(calls[c], pools[c % 2], rng, fmt::format("{} tokens a rank, call {} (layer {})", tokens, c, c % 2));
  }
}
