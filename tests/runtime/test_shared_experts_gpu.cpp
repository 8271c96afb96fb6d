// Shared experts in the call (docs/layer.md, "Shared experts"): on one GPU on every path (and on
// LLM-like inputs) and over
// loopback ranks (with redundant slots too, a rank with no tokens, the serial path), every rank's
// output against both references with the shared experts added; bad ids counted and their first
// slot named in the caller's numbering; a shared expert's weights replaced in place.
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

TEST_CASE("Shared experts on one GPU, every path: the references add them; a bad id's slot named as the caller "
          "numbers it",
          "[gpu][shared]") {
  struct Case {
    Config config;
    int shared;
    float scale;
    KernelPath path;
    std::vector<std::int64_t> sizes;
    workload::InputKind inputs = workload::InputKind::normal;
  };
  const Config kimi = with_experts(load_config("kimi_k3_a8w4"), 112);
  const Config kimi16 = with_experts(load_config("kimi_k3_a8w4"), 16);
  for (const Case& c : {Case{kimi, 1, 1.f, KernelPath::automatic, {1, 64, 512}},
                        Case{load_config("gpt_oss_20b_a8w4"), 2, 0.5f, KernelPath::automatic, {1, 100}},
                        Case{kimi16, 2, 1.f, KernelPath::tensor_core, {1, 37}},
                        Case{kimi16, 1, 2.f, KernelPath::portable, {1, 37}},
                        // LLM-like inputs: outlier channels; and massive tokens (every token checked)
                        Case{kimi, 1, 1.f, KernelPath::automatic, {256}, workload::InputKind::outliers},
                        Case{load_config("gpt_oss_20b_a8w4"), 2, 0.5f, KernelPath::automatic, {128},
                             workload::InputKind::massive}}) {
    std::mt19937_64 rng(41);
    SlotGroup g(with_shared_experts(c.config, c.shared, c.scale), 1, 512, 0, c.path);
    const ModelShape& m = g.model();
    REQUIRE(m.shared_experts == c.shared);
    const Mxfp4ExpertWeights routed = workload::random_group_weights(m, 1, 5);
    const Mxfp4ExpertWeights shared = workload::random_shared_weights(m, 5);
    const auto weights = g.prepare(routed, iota(m.experts), &shared);
    for (std::int64_t tokens : c.sizes) {
      workload::Routing route = workload::make_routing("uniform", tokens, m.topk, m.experts, rng);
      const bool plant = tokens > 2;
      if (plant) route.ids[2 * m.topk + 1] = m.experts + 5, route.ids[2 * m.topk + 2] = -1;  // bad, then empty
      std::vector<SlotCall> calls;
      calls.push_back(g.input(0, route, iota(m.experts), rng, c.inputs));
      g.launch(calls, weights);
      g.check(calls, routed, rng,
              fmt::format("{} + {} shared (weight {}), {} path, {} inputs", c.config.name, c.shared, c.scale,
                          to_string(g.ranks[0]->path()), workload::to_string(c.inputs)),
              c.inputs == workload::InputKind::massive ? 128 : 64, &shared);
      const CallErrors e = g.ranks[0]->take_errors();
      CHECK(e.bad_ids == (plant ? 1 : 0));
      CHECK(e.first_bad_slot == (plant ? 2 * m.topk + 1 : -1));  // t * topk + k of the caller's ids
      CHECK(e.bounds_violations == 0);
    }
  }
}

TEST_CASE("Shared experts over loopback ranks: with redundant slots under zipf routing, a rank with no tokens, the "
          "serial path, and a shared expert replaced in place",
          "[gpu][ep][shared]") {
  std::mt19937_64 rng(43);
  const Config config = with_shared_experts(workload::load_for_world("kimi_k3_a8w4", 4, 28), 1);  // 112 experts + 1 shared
  for (int redundant : {0, 16}) {
    SlotGroup g(config, 4, 512, redundant);
    const ModelShape& m = g.model();
    REQUIRE(m.experts == m.logical_experts + redundant);
    ModelShape logical_shape = m;
    logical_shape.experts_per_rank = m.logical_experts / 4;
    const Mxfp4ExpertWeights logical = workload::random_group_weights(logical_shape, 4, 7);
    const Mxfp4ExpertWeights shared = workload::random_shared_weights(m, 7);
    std::vector<int> placement = iota(m.experts);
    if (redundant) {
      const auto sample = workload::make_routing("zipf", 4096, m.topk, m.logical_experts, rng);
      placement =
          workload::eplb_placement(m.logical_experts, m.experts, workload::expert_load(sample, m.logical_experts), rng);
    }
    const auto weights = g.prepare(logical, placement, &shared);
    // With redundant slots a shorter run: the routing and slots are what it adds.
    for (std::int64_t tokens : redundant ? std::vector<std::int64_t>{1, 64} : std::vector<std::int64_t>{1, 64, 512}) {
      for (bool serial : {false, true}) {
        if (serial && (tokens != 64 || redundant)) continue;
        for (auto& rt : g.ranks) rt->set_serial(serial);
        std::vector<SlotCall> calls;
        long long planted = 0;
        for (int r = 0; r < 4; ++r) {
          const std::int64_t t = tokens == 64 && r == 3 ? 0 : tokens;  // rank 3 idle at 64
          workload::Routing route = workload::make_routing("zipf", t, m.topk, m.logical_experts, rng);
          if (t > 1 && r == 1) route.ids[3] = m.logical_experts + 2, ++planted;
          calls.push_back(g.input(r, std::move(route), placement, rng));
        }
        g.launch(calls, weights);
        g.check(calls, logical, rng, fmt::format("+1 shared, {} redundant slots{}", redundant, serial ? ", serial" : ""),
                24, &shared);
        long long bad = 0;
        for (int r = 0; r < 4; ++r) {
          const CallErrors e = g.ranks[r]->take_errors();
          bad += e.bad_ids;
          if (r == 1 && planted) CHECK(e.first_bad_slot == 3);
          CHECK(e.dropped_rows == 0);
          CHECK(e.bounds_violations == 0);
        }
        CHECK(bad == planted);
      }
    }
    for (auto& rt : g.ranks) rt->set_serial(false);
    if (redundant) continue;
    // Every rank's shared expert (its slot experts_per_rank, after the routed ones) replaced by other weights.
    const Mxfp4ExpertWeights other = workload::random_shared_weights(m, 99);
    std::vector<std::unique_ptr<PreparedWeights>> replacement;
    for (int r = 0; r < 4; ++r) {
      replacement.push_back(g.ranks[r]->prepare_replacement(other));
      g.ranks[r]->replace_experts(*weights[r], {m.experts_per_rank}, *replacement[r], g.streams[r]);
    }
    std::vector<SlotCall> calls;
    for (int r = 0; r < 4; ++r)
      calls.push_back(g.input(r, workload::make_routing("uniform", 64, m.topk, m.logical_experts, rng), placement, rng));
    g.launch(calls, weights);
    g.check(calls, logical, rng, "after the shared expert's replacement", 24, &other);
    for (auto& rt : g.ranks) CHECK_FALSE(rt->take_errors().any());
  }
}
