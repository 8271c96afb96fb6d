// Load balancing on loopback ranks (docs/ep.md, "Redundant experts" and "Replacing expert
// weights"): redundant slots that replicate hot experts, routed by physical id under skewed
// routing, against the references over the logical experts; and expert weights replaced in place
// in the middle of a burst of calls and under graph capture, every call against the weights it
// ran with.
#include <catch2/catch.hpp>

#include <random>

#include <fmt/format.h>

#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/slot_group.hpp"

using namespace megamoe;

using test::iota;
using test::SlotCall;
using test::SlotGroup;

TEST_CASE("EPLB on loopback ranks: redundant slots of hot experts, physical ids under zipf routing, against the "
          "references over the logical experts",
          "[gpu][ep][eplb]") {
  struct Case {
    Config config;
    int world, redundant;
  };
  for (const Case& c : {Case{workload::load_for_world("kimi_k3_a8w4", 4, 28), 4, 16},  // 112 experts, 128 slots
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
      std::vector<SlotCall> calls;
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
  const Config config = workload::load_for_world("kimi_k3_a8w4", 2, 16);  // 32 experts, 16 a rank
  SlotGroup g(config, 2, 128, 0);
  const ModelShape& m = g.model();
  const int E = m.experts;
  const Mxfp4ExpertWeights a = workload::random_group_weights(m, 2, 7), b = workload::random_group_weights(m, 2, 8);
  const Mxfp4ExpertWeights pool = append_experts(a, b);  // expert e of A is e, of B is E + e
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
    std::vector<SlotCall> calls;
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
    std::vector<SlotCall> captured = routed(64);
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
