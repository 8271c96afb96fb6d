// Load balancing on loopback ranks (docs/ep.md, "Redundant experts" and "Replacing expert
// weights"): redundant slots that replicate hot experts, routed by physical id under skewed
// routing, against the references over the logical experts; and expert weights replaced in place
// in the middle of a burst of calls and under graph capture, every call against the weights it
// ran with.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "common/cli.hpp"
#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/layer_outputs.hpp"

using namespace megamoe;

namespace {

struct Call {
  workload::Routing logical, physical;  // the references read the first, the kernels the second
  std::vector<std::uint16_t> x;
  test::CallBuffers bufs;  // the kernels' inputs (physical ids) and output
};

// One group of loopback ranks with a stream each.
struct SlotGroup {
  std::vector<std::unique_ptr<Runtime>> ranks;
  std::vector<StreamHandle> streams;

  SlotGroup(const Config& config, int world, int max_tokens, int redundant) {
    RuntimeOptions o;
    o.world = world, o.max_tokens = max_tokens, o.redundant_experts = redundant;
    ranks = Runtime::create_ranks(config, o);
    for (auto& rt : ranks) streams.push_back(rt->device().create_stream());
  }
  ~SlotGroup() {
    for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r]->device().destroy_stream(streams[r]);
  }
  int world() const { return int(ranks.size()); }
  const ModelShape& model() const { return ranks[0]->config().model; }

  // Rank r's slots' weights: the experts of `pool` that `slots` names, rank by rank.
  std::vector<std::unique_ptr<PreparedWeights>> prepare(const Mxfp4ExpertWeights& pool, const std::vector<int>& slots) {
    std::vector<std::unique_ptr<PreparedWeights>> w;
    const int per = model().experts_per_rank;
    for (int r = 0; r < world(); ++r)
      w.push_back(ranks[r]->prepare_weights(
          gather_experts(pool, std::vector<int>(slots.begin() + r * per, slots.begin() + (r + 1) * per))));
    return w;
  }

  // Fresh inputs on rank r: `logical` routed to slots by `placement` (each slot's logical expert).
  Call input(int r, workload::Routing logical, const std::vector<int>& placement, std::mt19937_64& rng) {
    const ModelShape& m = model();
    Call c;
    c.physical = workload::to_physical(logical, placement, m.logical_experts, rng);
    c.logical = std::move(logical);
    c.x = workload::random_bf16(c.logical.tokens, m.model_dim, rng);
    c.bufs = test::upload_call(ranks[r]->device(), c.x, c.physical, 256);
    return c;
  }

  void launch(std::vector<Call>& calls, const std::vector<std::unique_ptr<PreparedWeights>>& w) {
    for (int r = 0; r < world(); ++r)
      ranks[r]->forward(*w[r], calls[r].bufs.x.get(), static_cast<const int*>(calls[r].bufs.ids.get()),
                        static_cast<const float*>(calls[r].bufs.weights.get()), calls[r].bufs.y.get(), calls[r].logical.tokens,
                        streams[r]);
  }
  void sync() {
    for (int r = 0; r < world(); ++r) ranks[r]->device().synchronize(streams[r]);
  }

  // Every rank's output against the references over `logical` weights (experts by logical id):
  // every element written, nothing past y, the bars held. Waits for the device.
  void check(std::vector<Call>& calls, const Mxfp4ExpertWeights& logical, std::mt19937_64& rng, const std::string& what) {
    sync();
    std::vector<std::vector<std::uint16_t>> ys(world());
    std::vector<workload::RankOutput> outs;
    for (int r = 0; r < world(); ++r) {
      std::vector<std::uint8_t> raw(calls[r].bufs.y.bytes());
      ranks[r]->device().copy_to_host(raw.data(), calls[r].bufs.y.get(), raw.size());
      const std::size_t n = calls[r].x.size() * 2;
      for (std::size_t b = n; b < raw.size(); ++b) REQUIRE(raw[b] == 0xFF);  // nothing written past y
      ys[r].resize(calls[r].x.size());
      std::memcpy(ys[r].data(), raw.data(), n);
      outs.push_back({&calls[r].x, &calls[r].logical, &ys[r]});
    }
    const auto results = workload::check_group(ranks[0]->config(), logical, model().logical_experts, outs, 48, rng,
                                               ranks[0]->arithmetic(calls[0].logical.tokens));
    for (int r = 0; r < world(); ++r) {
      INFO(what << ": rank " << r << " of " << world() << ", " << calls[r].logical.tokens << " tokens");
      const workload::CheckResult& c = results[r];
      fmt::print("  {}: rank {}/{}, {} tokens: relL2 exact {:.3e}, emulated {:.3e}, worst token {:.3e}\n", what, r,
                 world(), calls[r].logical.tokens, c.rel_l2_exact, c.rel_l2_emulated, c.worst_token_emulated);
      CHECK(c.unwritten == 0);
      CHECK(c.rel_l2_exact <= workload::kExactBar);
      CHECK(c.rel_l2_emulated <= c.bars.call);
      CHECK(c.worst_token_emulated <= c.bars.token);
    }
  }
};

// A and B's experts in one set: A's first.
Mxfp4ExpertWeights joined(const Mxfp4ExpertWeights& a, const Mxfp4ExpertWeights& b) {
  Mxfp4ExpertWeights j = a;
  j.experts = a.experts + b.experts;
  auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  add(j.w1_packed, b.w1_packed), add(j.w1_scales, b.w1_scales), add(j.w2_packed, b.w2_packed);
  add(j.w2_scales, b.w2_scales), add(j.b1, b.b1), add(j.b2, b.b2);
  return j;
}

std::vector<int> iota(int n, int first = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace

TEST_CASE("EPLB on loopback ranks: redundant slots of hot experts, physical ids under zipf routing, against the "
          "references over the logical experts",
          "[gpu][ep][eplb]") {
  struct Case {
    Config config;
    int world, redundant;
  };
  for (const Case& c : {Case{cli::load_for_world("kimi_k3_a8w4", 4, 28), 4, 16},  // 112 experts, 128 slots
                        Case{load_config("gpt_oss_20b_a8w4"), 4, 8}}) {          // 32 experts and biases, 40 slots
    std::mt19937_64 rng(31);
    SlotGroup g(c.config, c.world, 512, c.redundant);
    const ModelShape& m = g.model();
    REQUIRE(m.experts == m.logical_experts + c.redundant);
    ModelShape logical_shape = m;
    logical_shape.experts_per_rank = m.logical_experts / c.world;
    const Mxfp4ExpertWeights logical = workload::random_group_weights(logical_shape, c.world, 7);
    // The placement from a first look at the load, as an engine's EPLB plans from its statistics.
    const auto sample = workload::make_routing("zipf", 4096, m.topk, m.logical_experts, rng);
    const std::vector<int> placement =
        workload::eplb_placement(m.logical_experts, m.experts, workload::expert_load(sample, m.logical_experts), rng);
    const auto weights = g.prepare(logical, placement);
    for (std::int64_t tokens : {1, 64, 512}) {
      std::vector<Call> calls;
      long long planted = 0;
      for (int r = 0; r < c.world; ++r) {
        workload::Routing route = workload::make_routing("zipf", tokens, m.topk, m.logical_experts, rng);
        if (tokens > 1 && r == 1) route.ids[3] = m.logical_experts + 2, ++planted;  // a bad id: past every slot
        calls.push_back(g.input(r, std::move(route), placement, rng));
      }
      g.launch(calls, weights);
      g.check(calls, logical, rng, fmt::format("{} +{} slots, {} tokens", c.config.name, c.redundant, tokens));
      long long bad = 0;
      for (auto& rt : g.ranks) {
        const CallErrors e = rt->take_errors();
        bad += e.bad_ids;
        CHECK(e.dropped_rows == 0);
        CHECK(e.bounds_violations == 0);
      }
      CHECK(bad == planted);
    }
  }
}

TEST_CASE("Expert weights replaced in place: mid-burst with no host sync, captured in a graph, and read by graphs "
          "captured before; every call against the weights it ran with",
          "[gpu][ep][eplb][graph]") {
  std::mt19937_64 rng(32);
  const Config config = cli::load_for_world("kimi_k3_a8w4", 2, 16);  // 32 experts, 16 a rank
  SlotGroup g(config, 2, 128, 0);
  const ModelShape& m = g.model();
  const int E = m.experts;
  const Mxfp4ExpertWeights a = workload::random_group_weights(m, 2, 7), b = workload::random_group_weights(m, 2, 8);
  const Mxfp4ExpertWeights pool = joined(a, b);  // expert e of A is e, of B is E + e
  std::vector<int> state = iota(E);              // which pool expert each slot holds now
  auto weights = g.prepare(pool, state);
  // Rank 0's slots 1, 5 and 9 and rank 1's slots 0 and 15 (global 16 and 31) take B's experts 3, 4, 5, 6, 7.
  const std::vector<std::vector<int>> slots = {{1, 5, 9}, {0, 15}};
  const std::vector<std::vector<int>> incoming = {{E + 3, E + 4, E + 5}, {E + 6, E + 7}};
  std::vector<std::unique_ptr<PreparedWeights>> replacement, back;
  for (int r = 0; r < 2; ++r) {
    replacement.push_back(g.ranks[r]->prepare_replacement(gather_experts(pool, incoming[r])));
    std::vector<int> originals;
    for (int s : slots[r]) originals.push_back(r * 16 + s);
    back.push_back(g.ranks[r]->prepare_replacement(gather_experts(pool, originals)));
  }
  auto routed = [&](std::int64_t tokens) {
    std::vector<Call> calls;
    for (int r = 0; r < 2; ++r)
      calls.push_back(g.input(r, workload::make_routing("uniform", tokens, m.topk, E, rng), iota(E), rng));
    return calls;
  };
  auto replaced = [&](std::vector<int> s, const std::vector<std::vector<int>>& with) {
    for (int r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < slots[r].size(); ++i) s[r * 16 + slots[r][i]] = with[r][i];
    return s;
  };
  std::vector<int> originals_state = state;

  SECTION("mid-burst") {
    auto first = routed(100), second = routed(100), third = routed(37);
    g.launch(first, weights);
    for (int r = 0; r < 2; ++r) g.ranks[r]->replace_experts(*weights[r], slots[r], *replacement[r], g.streams[r]);
    g.launch(second, weights);
    for (int r = 0; r < 2; ++r) g.ranks[r]->replace_experts(*weights[r], slots[r], *back[r], g.streams[r]);
    g.launch(third, weights);
    g.check(first, gather_experts(pool, originals_state), rng, "before the replacement");
    g.check(second, gather_experts(pool, replaced(originals_state, incoming)), rng, "after the replacement");
    g.check(third, gather_experts(pool, originals_state), rng, "after replacing back");
  }
  SECTION("graphs") {
    std::vector<Call> captured = routed(64);
    std::vector<GraphHandle> calls, replacing;
    for (int r = 0; r < 2; ++r) g.ranks[r]->prepare(64);
    for (int r = 0; r < 2; ++r) {  // a call captured while the weights are A's
      Device& d = g.ranks[r]->device();
      d.begin_capture(g.streams[r]);
      g.ranks[r]->forward(*weights[r], captured[r].bufs.x.get(), static_cast<const int*>(captured[r].bufs.ids.get()),
                          static_cast<const float*>(captured[r].bufs.weights.get()), captured[r].bufs.y.get(), 64, g.streams[r]);
      calls.push_back(d.end_capture(g.streams[r]));
      d.begin_capture(g.streams[r]);  // and the replacement itself, captured
      g.ranks[r]->replace_experts(*weights[r], slots[r], *replacement[r], g.streams[r]);
      replacing.push_back(d.end_capture(g.streams[r]));
    }
    for (int r = 0; r < 2; ++r) g.ranks[r]->device().launch_graph(replacing[r], g.streams[r]);
    for (int r = 0; r < 2; ++r) g.ranks[r]->device().launch_graph(calls[r], g.streams[r]);
    g.check(captured, gather_experts(pool, replaced(originals_state, incoming)), rng, "a graph after a captured replacement");
    for (int r = 0; r < 2; ++r) {
      g.ranks[r]->device().destroy_graph(calls[r]);
      g.ranks[r]->device().destroy_graph(replacing[r]);
    }
  }
  SECTION("bad requests are named") {
    Runtime& rt = *g.ranks[0];
    CHECK_THROWS_WITH(rt.replace_experts(*weights[0], {1, 16, 2}, *replacement[0]),
                      Catch::Contains("slots[1] = 16, expected 0..15"));
    CHECK_THROWS_WITH(rt.replace_experts(*weights[0], {4, 7, 4}, *replacement[0]),
                      Catch::Contains("slots[0] and slots[2] are both 4"));
    CHECK_THROWS_WITH(rt.replace_experts(*weights[0], {4, 7}, *replacement[0]),
                      Catch::Contains("2 slots for a replacement of 3 experts"));
    Mxfp4ExpertWeights wrong = Mxfp4ExpertWeights::zeros(1, m.model_dim, m.inter_dim / 2);
    CHECK_THROWS_WITH(rt.prepare_replacement(wrong), Catch::Contains("inter_dim"));
  }
  for (auto& rt : g.ranks) CHECK_FALSE(rt->take_errors().any());
}
