// The expert-parallel operator on loopback ranks (every rank on GPU 0, docs/ep.md), against the
// CPU references over each rank's own tokens with every rank's experts (each expert's weights
// drawn from its global id, so a row delivered to the wrong rank or expert fails): the Kimi-K3
// shape at W = 2, 4 and 8 (8 x 112 = 896 experts), every activation, uneven and bad routings, T
// = 0 and unequal T, a burst of calls without host sync, graph replay, fused against serial,
// and a rank that never calls. With MEGAMOE_TEST_EP_TRANSPORT=peer the same cases run with a rank
// per GPU where there are enough GPUs.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include <fmt/format.h>

#include "common/workload.hpp"
#include "ep/dispatch_plan.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/layer_outputs.hpp"
#include "runtime/test_config_variants.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {

Config variant(const std::string& name) {
  static test::TempDir dir;
  return load_config(test::write_config_variant(dir.path(), name));
}

// Kimi-K3 cut so that each of `world` ranks holds `per_rank` experts (the suites' per-rank work).
Config kimi(int world, int per_rank = 112) { return workload::load_for_world("kimi_k3_a8w4", world, per_rank); }

// Every expert of a group of a shape, at least the model's: made once per process for the most
// experts asked so far (Kimi-K3's 896 are 16 GB). Each expert is drawn from the seed and its
// global id alone, so a group of fewer experts takes the first of them.
const Mxfp4ExpertWeights& group_weights(const ModelShape& m) {
  static std::map<std::tuple<int, int, bool>, Mxfp4ExpertWeights> cache;
  auto key = std::make_tuple(m.model_dim, m.inter_dim, m.expert_biases);
  auto it = cache.find(key);
  if (it == cache.end() || it->second.experts < m.experts) {
    if (it != cache.end()) cache.erase(it);
    ModelShape all = m;
    all.experts_per_rank = (std::max(m.experts, 8 * m.experts_per_rank) + 7) / 8;  // 8 ranks' worth, or the model
    it = cache.emplace(key, workload::random_group_weights(all, 8, 42)).first;
  }
  return it->second;
}

struct RankInput {
  std::int64_t tokens = 0;
  workload::Routing routing;
  std::vector<std::uint16_t> x;
  DeviceBuffer x_d, ids_d, w_d, y_d;
};

// MEGAMOE_TEST_EP_TRANSPORT=peer runs these groups on GPUs 0 .. W - 1 (the peer transport; issue
// 24's multi-GPU run), where the machine has W GPUs; otherwise, and by default, on loopback.
Transport transport_for(int world) {
  const char* t = std::getenv("MEGAMOE_TEST_EP_TRANSPORT");
  if (!t || std::string(t) != "peer") return Transport::loopback;
  try {
    open_device(BackendKind::cuda, world - 1);
    return Transport::peer;
  } catch (const Error& e) {
    WARN("MEGAMOE_TEST_EP_TRANSPORT=peer, but a group of " << world << " needs " << world << " GPUs (" << e.what()
                                                            << "): this group runs on loopback ranks");
    return Transport::loopback;
  }
}

// A group of loopback ranks (or peer ranks, above), each with its weights and its stream.
struct LoopbackGroup {
  std::vector<std::unique_ptr<Runtime>> ranks;
  std::vector<std::unique_ptr<PreparedWeights>> weights;
  std::vector<StreamHandle> streams;
  const Mxfp4ExpertWeights* all = nullptr;

  LoopbackGroup(const Config& config, int world, int max_tokens, KernelPath path = KernelPath::automatic,
                int timeout_ms = 5000, long long capacity = 0) {
    RuntimeOptions o;
    o.world = world;
    o.max_tokens = max_tokens;
    o.path = path;
    o.timeout_ms = timeout_ms;
    o.routed_rows_capacity = capacity;
    o.transport = transport_for(world);
    ranks = Runtime::create_ranks(config, o);
    const ModelShape& m = ranks[0]->config().model;
    all = &group_weights(m);
    for (auto& rt : ranks) {
      weights.push_back(
          rt->prepare_weights(workload::slice_experts(*all, rt->rank() * m.experts_per_rank, m.experts_per_rank)));
      streams.push_back(rt->device().create_stream());
    }
  }
  ~LoopbackGroup() {
    for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r]->device().destroy_stream(streams[r]);
  }
  int world() const { return int(ranks.size()); }
  const ModelShape& model() const { return ranks[0]->config().model; }

  // Fresh inputs for every rank (tokens[r] each), outputs poisoned.
  std::vector<RankInput> inputs(const std::vector<std::int64_t>& tokens, const std::string& route, std::mt19937_64& rng) {
    const ModelShape& m = model();
    std::vector<RankInput> in(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      RankInput& i = in[r];
      i.tokens = tokens[r];
      i.routing = workload::make_routing(route, i.tokens, m.topk, world() * m.experts_per_rank, rng, m.experts_per_rank);
      i.x = workload::random_bf16(i.tokens, m.model_dim, rng);
      test::CallBuffers b = test::upload_call(ranks[r]->device(), i.x, i.routing, 256);
      i.x_d = std::move(b.x), i.ids_d = std::move(b.ids), i.w_d = std::move(b.weights), i.y_d = std::move(b.y);
    }
    return in;
  }

  // One call on `callers` (every rank by default), launched one rank after another without a sync.
  void launch(std::vector<RankInput>& in, std::vector<int> callers = {}) {
    if (callers.empty())
      for (int r = 0; r < world(); ++r) callers.push_back(r);
    for (int r : callers)
      ranks[r]->forward(*weights[r], in[r].x_d.get(), static_cast<const int*>(in[r].ids_d.get()),
                        static_cast<const float*>(in[r].w_d.get()), in[r].y_d.get(), in[r].tokens, streams[r]);
  }
  void sync() {
    for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r]->device().synchronize(streams[r]);
  }
  std::vector<std::uint8_t> output(const RankInput& i, int r) {
    std::vector<std::uint8_t> v(i.y_d.bytes());
    ranks[r]->device().copy_to_host(v.data(), i.y_d.get(), v.size());
    return v;
  }

  // Each rank's output against the references: every element written, nothing past y, the
  // kernels' error counts as planted, the bars held.
  void check(std::vector<RankInput>& in, std::size_t ref_tokens, std::mt19937_64& rng, const std::string& what) {
    const Config& cfg = ranks[0]->config();
    std::vector<std::vector<std::uint16_t>> ys(world());
    std::vector<workload::RankOutput> outs;
    for (int r = 0; r < world(); ++r) {
      const std::vector<std::uint8_t> raw = output(in[r], r);
      ys[r].resize(in[r].x.size());
      std::memcpy(ys[r].data(), raw.data(), ys[r].size() * 2);
      outs.push_back({&in[r].x, &in[r].routing, &ys[r]});
    }
    const std::vector<workload::CheckResult> results =
        workload::check_group(cfg, *all, world() * model().experts_per_rank, outs, ref_tokens, rng,
                              ranks[0]->arithmetic(in[0].tokens));
    for (int r = 0; r < world(); ++r) {
      INFO(what << ": rank " << r << " of " << world() << ", " << in[r].tokens << " tokens");
      CallErrors e = ranks[r]->take_errors();
      CHECK(e.bad_ids == in[r].routing.planted_bad_ids);
      CHECK(e.bounds_violations == 0);
      CHECK(e.dropped_rows == 0);
      const std::vector<std::uint8_t> raw = output(in[r], r);
      const std::size_t n = in[r].x.size() * 2;
      for (std::size_t b = n; b < raw.size(); ++b) REQUIRE(raw[b] == 0xFF);  // nothing written past y
      if (in[r].tokens == 0) continue;
      const workload::CheckResult& c = results[r];
      fmt::print("  {}: rank {}/{}, {} tokens: relL2 exact {:.3e}, emulated {:.3e}, worst token {:.3e} over {}\n", what, r,
                 world(), in[r].tokens, c.rel_l2_exact, c.rel_l2_emulated, c.worst_token_emulated, c.checked_tokens);
      CHECK(c.unwritten == 0);
      CHECK(c.rel_l2_exact <= workload::kExactBar);
      CHECK(c.rel_l2_emulated <= c.bars.call);
      CHECK(c.worst_token_emulated <= c.bars.token);
    }
  }
};

std::vector<std::int64_t> same(int world, std::int64_t t) { return std::vector<std::int64_t>(world, t); }

}  // namespace

TEST_CASE("EP loopback, Kimi-K3: W = 2, 4, 8 at 1 to 8192 tokens a rank", "[gpu][ep][situv2]") {
  std::mt19937_64 rng(21);
  for (int world : {2, 4, 8}) {
    // Uniform routing sends each rank about its own token count's rows: a capacity of 2x that
    // (checked: nothing dropped) keeps eight ranks' workspaces on one GPU.
    LoopbackGroup g(kimi(world), world, 8192, KernelPath::automatic, 5000, 2LL * 8192 * 16);
    for (std::int64_t t : {1, 8, 128, 1024, 8192}) {
      auto in = g.inputs(same(world, t), "uniform", rng);
      g.launch(in);
      g.sync();
      g.check(in, t <= 8 ? 8 : 24, rng, fmt::format("W {} uniform", world));
    }
  }
}

TEST_CASE("EP loopback, Kimi-K3 at EP16: its 896 experts, 56 a rank, on the tiles tuned for twice the tokens",
          "[gpu][ep][ep16][situv2]") {
  std::mt19937_64 rng(27);
  // A capacity of 2x the mean routed rows (checked: nothing dropped) keeps 16 workspaces on one GPU.
  LoopbackGroup g(load_config("kimi_k3_a8w4"), 16, 1024, KernelPath::automatic, 10000, 2LL * 1024 * 16);
  REQUIRE(g.model().experts == 896);
  REQUIRE(g.model().experts_per_rank == 56);
  CHECK(g.ranks[0]->config().table_key(1000) == 2048);  // the bucket keys count tokens at 112 experts a rank
  for (std::int64_t t : {1, 8, 128, 1000}) {
    auto in = g.inputs(same(16, t), t == 128 ? "holes" : "uniform", rng);
    g.launch(in);
    g.sync();
    g.check(in, 8, rng, fmt::format("W 16 {}", t == 128 ? "holes" : "uniform"));
  }
}

TEST_CASE("EP loopback: every activation, the fp8 wire, the checked build, fp8-resident weights, 256-row weight "
          "tiles, the portable and tensor-core paths",
          "[gpu][ep]") {
  std::mt19937_64 rng(22);
  struct V {
    Config config;
    KernelPath path;
  };
  for (const V& v : {V{variant("kimi_silu"), KernelPath::automatic}, V{variant("kimi_swiglu"), KernelPath::automatic},
                     V{variant("kimi_fp8wire"), KernelPath::automatic}, V{variant("kimi_checked"), KernelPath::automatic},
                     V{variant("kimi_fp8res"), KernelPath::automatic}, V{variant("kimi_w256"), KernelPath::automatic},
                     V{kimi(2), KernelPath::portable}, V{kimi(2), KernelPath::tensor_core},
                     V{workload::load_for_world("generic_a8w4", 2, 32), KernelPath::automatic}}) {
    LoopbackGroup g(v.config, 2, 512, v.path);
    for (std::int64_t t : {8, 300}) {
      auto in = g.inputs(same(2, t), "uniform", rng);
      g.launch(in);
      g.sync();
      g.check(in, 64, rng, fmt::format("{} {} path", g.ranks[0]->config().name, to_string(g.ranks[0]->path())));
    }
  }
}

// Padded dims cross the ranks: x is sent at the path's width (zeros past 2880), y written at the
// model's; the biases of each rank's own experts. Fused and serial dispatch.
TEST_CASE("EP loopback, gpt-oss-120b: W = 4 and 8, dims padded to 2944, expert biases, fused and serial",
          "[gpu][ep][gpt_oss]") {
  std::mt19937_64 rng(28);
  for (int world : {4, 8}) {
    LoopbackGroup g(load_config("gpt_oss_120b_a8w4"), world, 2048, KernelPath::automatic, 5000, 2LL * 2048 * 4);
    REQUIRE(g.model().experts_per_rank == 128 / world);
    for (bool serial : {false, true}) {
      for (auto& r : g.ranks) r->set_serial(serial);
      for (std::int64_t t : {1, 128, 2000}) {
        auto in = g.inputs(same(world, t), t == 128 ? "holes" : "uniform", rng);
        g.launch(in);
        g.sync();
        g.check(in, 16, rng, fmt::format("gpt-oss-120b W {}{}", world, serial ? " serial" : ""));
      }
    }
  }
}

TEST_CASE("EP loopback: skewed, empty and bad routings, T = 0 and unequal T", "[gpu][ep][situv2]") {
  std::mt19937_64 rng(23);
  LoopbackGroup g(kimi(4), 4, 1024);
  struct C {
    std::string route;
    std::vector<std::int64_t> tokens;
  };
  for (const C& c : {C{"one_rank", {256, 256, 256, 256}},  // every slot of every rank to rank 0's experts
                     C{"single", {300, 1, 7, 64}},         // one hot expert
                     C{"holes", {512, 100, 0, 3}},         // -1 slots, tokens with none, T = 0
                     C{"bad", {300, 300, 1, 0}},           // ids outside [-1, 448)
                     C{"uniform", {0, 0, 0, 5}},           // three ranks with no tokens
                     C{"uniform", {0, 0, 0, 0}},           // nobody has tokens
                     C{"uniform", {1024, 17, 500, 1}}}) {  // unequal T, different buckets
    auto in = g.inputs(c.tokens, c.route, rng);
    g.launch(in);
    g.sync();
    g.check(in, 32, rng, c.route);
  }
}

TEST_CASE("EP loopback: a burst of calls without host sync gives the bits of calls made one at a time",
          "[gpu][ep][graph]") {
  std::mt19937_64 rng(24);
  LoopbackGroup g(kimi(2), 2, 256);
  const std::vector<std::int64_t> sizes = {1, 7, 64, 200, 33, 128, 0, 5};
  std::vector<std::vector<RankInput>> calls;
  std::vector<std::vector<std::vector<std::uint8_t>>> single;
  for (std::size_t i = 0; i < 25; ++i) {
    const std::int64_t t = sizes[i % sizes.size()];
    calls.push_back(g.inputs({t, sizes[(i + 3) % sizes.size()]}, i % 5 == 4 ? "holes" : "uniform", rng));
    g.launch(calls.back());
    g.sync();
    single.push_back({g.output(calls.back()[0], 0), g.output(calls.back()[1], 1)});
  }
  // 200 calls back to back: the 25 input sets eight times over, each set's outputs checked after
  // its last use.
  for (int round = 0; round < 8; ++round)
    for (auto& c : calls) {
      for (int r = 0; r < 2; ++r) g.ranks[r]->device().fill_bytes(c[r].y_d.get(), 0xFF, c[r].y_d.bytes());
      g.launch(c);
    }
  g.sync();
  for (std::size_t i = 0; i < calls.size(); ++i)
    for (int r = 0; r < 2; ++r) {
      INFO("call " << i << ", rank " << r << ", " << calls[i][r].tokens << " tokens");
      CHECK(g.output(calls[i][r], r) == single[i][r]);
    }
  for (auto& rt : g.ranks) CHECK_FALSE(rt->take_errors().any());
}

TEST_CASE("EP loopback: captured calls replay on new inputs with the bits of direct calls", "[gpu][ep][graph]") {
  std::mt19937_64 rng(25);
  LoopbackGroup g(kimi(2), 2, 256);
  auto in = g.inputs(same(2, 100), "uniform", rng);
  std::vector<GraphHandle> graphs;
  for (int r = 0; r < 2; ++r) {
    g.ranks[r]->device().begin_capture(g.streams[r]);
    g.launch(in, {r});
    graphs.push_back(g.ranks[r]->device().end_capture(g.streams[r]));
  }
  for (int replay = 0; replay < 4; ++replay) {
    INFO("replay " << replay);
    auto fresh = g.inputs(same(2, 100), "uniform", rng);
    for (int r = 0; r < 2; ++r) {  // new contents of the captured buffers
      Device& d = g.ranks[r]->device();
      d.copy_device_async(in[r].x_d.get(), fresh[r].x_d.get(), in[r].x_d.bytes(), g.streams[r]);
      d.copy_device_async(in[r].ids_d.get(), fresh[r].ids_d.get(), in[r].ids_d.bytes(), g.streams[r]);
      d.copy_device_async(in[r].w_d.get(), fresh[r].w_d.get(), in[r].w_d.bytes(), g.streams[r]);
      d.synchronize(g.streams[r]);
      d.fill_bytes(in[r].y_d.get(), 0xFF, in[r].y_d.bytes());
    }
    for (int r = 0; r < 2; ++r) g.ranks[r]->device().launch_graph(graphs[r], g.streams[r]);
    g.sync();
    g.launch(fresh);  // the same inputs directly
    g.sync();
    for (int r = 0; r < 2; ++r) {
      const auto from_graph = g.output(in[r], r);
      CHECK(from_graph == g.output(fresh[r], r));
      std::size_t poison = 0;
      for (std::size_t b = 0; b + 1 < in[r].x.size() * 2; b += 2) poison += from_graph[b] == 0xFF && from_graph[b + 1] == 0xFF;
      CHECK(poison == 0);
    }
  }
  for (int r = 0; r < 2; ++r) g.ranks[r]->device().destroy_graph(graphs[r]);
  for (auto& rt : g.ranks) CHECK_FALSE(rt->take_errors().any());
}

TEST_CASE("EP loopback: the fused and the serial path give the same bits", "[gpu][ep]") {
  std::mt19937_64 rng(26);
  for (int world : {2, 4}) {
    LoopbackGroup g(kimi(world), world, 1024);
    for (std::int64_t t : {1, 128, 1000}) {
      auto in = g.inputs(same(world, t), t == 128 ? "holes" : "uniform", rng);
      g.launch(in);
      g.sync();
      std::vector<std::vector<std::uint8_t>> fused;
      for (int r = 0; r < world; ++r) fused.push_back(g.output(in[r], r)), g.ranks[r]->set_serial(true);
      for (int r = 0; r < world; ++r) g.ranks[r]->device().fill_bytes(in[r].y_d.get(), 0xFF, in[r].y_d.bytes());
      g.launch(in);
      g.sync();
      for (int r = 0; r < world; ++r) {
        INFO("W " << world << ", " << t << " tokens, rank " << r);
        CHECK(g.output(in[r], r) == fused[r]);  // the same kernels' arithmetic on the same rows
        g.ranks[r]->set_serial(false);
      }
    }
  }
}

TEST_CASE("EP loopback: a rank that never calls ends the others' calls in PeerTimeoutError; recover() and a clean "
          "call work",
          "[gpu][ep]") {
  std::mt19937_64 rng(27);
  const int timeout_ms = 1000;
  LoopbackGroup g(kimi(4), 4, 256, KernelPath::automatic, timeout_ms);
  auto in = g.inputs(same(4, 64), "uniform", rng);
  const auto t0 = std::chrono::steady_clock::now();
  g.launch(in, {0, 1, 2});  // rank 3 never calls
  g.sync();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("  the three calling ranks' kernels ended after {:.2f} s (bound {} ms)\n", waited, timeout_ms);
  CHECK(waited < 4.0 * timeout_ms / 1000.0 + 1.0);  // each wait ends within its bound; nothing hangs
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    try {
      g.ranks[r]->take_errors();
      FAIL("no PeerTimeoutError");
    } catch (const PeerTimeoutError& e) {
      CHECK(e.rank == r);
      CHECK(e.peer == 3);
      CHECK(e.phase == "counts");
      CHECK_THAT(e.what(), Catch::Contains("waited more than 1000 ms for rank 3"));
    }
  }
  CHECK_THROWS_WITH(g.launch(in), Catch::Contains("call recover()"));
  g.ranks[2]->recover();  // one process: recovers every rank
  for (int r = 0; r < 4; ++r) g.ranks[r]->device().fill_bytes(in[r].y_d.get(), 0xFF, in[r].y_d.bytes());
  g.launch(in);
  g.sync();
  g.check(in, 64, rng, "after recover()");
}

TEST_CASE("EP loopback: rows past a rank's capacity are dropped and counted as the host plan counts them; the next "
          "call is whole",
          "[gpu][ep]") {
  std::mt19937_64 rng(28);
  const long long capacity = 300;  // routed rows a rank holds; uniform routing of 100 tokens sends each about 800
  LoopbackGroup g(kimi(2), 2, 128, KernelPath::automatic, 5000, capacity);
  {  // each rank's workspace as allocated is what workspace_bytes stated before creation
    RuntimeOptions o = g.ranks[0]->options();
    o.path = g.ranks[0]->path();
    const WorkspaceBytes planned = Runtime::workspace_bytes(kimi(2), o);
    CHECK(planned.routed_rows == capacity);
    for (int r = 0; r < 2; ++r) {
      const WorkspaceBytes got = g.ranks[r]->workspace_bytes();
      CHECK(got.layer == planned.layer);
      CHECK(got.symmetric_region == planned.symmetric_region);
      CHECK(got.group_plan == planned.group_plan);
      CHECK(got.routed_rows == planned.routed_rows);
    }
  }
  auto in = g.inputs(same(2, 100), "uniform", rng);
  g.launch(in);
  g.sync();
  const std::vector<RankPlan> plan = dispatch_plan({in[0].routing.ids, in[1].routing.ids}, g.model().topk,
                                                   g.model().experts_per_rank, capacity);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(plan[r].dropped > 0);
    const CallErrors e = g.ranks[r]->take_errors();
    CHECK(e.dropped_rows == plan[r].dropped);
    const std::vector<std::uint8_t> raw = g.output(in[r], r);
    for (std::size_t b = in[r].x.size() * 2; b < raw.size(); ++b) REQUIRE(raw[b] == 0xFF);  // nothing past y
  }
  auto small = g.inputs(same(2, 9), "uniform", rng);  // 2 x 9 x 16 = 288 rows at most a rank: within the capacity
  g.launch(small);
  g.sync();
  g.check(small, 9, rng, "after a call past the capacity");
}
