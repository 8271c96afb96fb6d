// Shared experts in the call (docs/layer.md, "Shared experts"): on one GPU on every path and over
// loopback ranks (with redundant slots too, a rank with no tokens, the serial path), every rank's
// output against both references with the shared experts added; bad ids counted and their first
// slot named in the caller's numbering; a shared expert's weights replaced in place.
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
  test::CallBuffers bufs;
};

// y from the device: every element written, nothing past it (256 poisoned bytes).
std::vector<std::uint16_t> read_y(Device& dev, const Call& c) {
  std::vector<std::uint8_t> raw(c.bufs.y.bytes());
  dev.copy_to_host(raw.data(), c.bufs.y.get(), raw.size());
  const std::size_t n = c.x.size() * 2;
  for (std::size_t b = n; b < raw.size(); ++b) REQUIRE(raw[b] == 0xFF);
  std::vector<std::uint16_t> y(c.x.size());
  std::memcpy(y.data(), raw.data(), n);
  return y;
}

void require_bars(const workload::CheckResult& c, const std::string& what) {
  fmt::print("  {}: relL2 exact {:.3e}, emulated {:.3e}, worst token {:.3e}\n", what, c.rel_l2_exact, c.rel_l2_emulated,
             c.worst_token_emulated);
  INFO(what);
  CHECK(c.unwritten == 0);
  CHECK(c.rel_l2_exact <= workload::kExactBar);
  CHECK(c.rel_l2_emulated <= c.bars.call);
  CHECK(c.worst_token_emulated <= c.bars.token);
}

// A group of loopback ranks (or one GPU: world 1) with shared experts, a stream each.
struct SharedGroup {
  std::vector<std::unique_ptr<Runtime>> ranks;
  std::vector<StreamHandle> streams;

  SharedGroup(const Config& config, int world, int max_tokens, int redundant = 0,
              KernelPath path = KernelPath::automatic) {
    RuntimeOptions o;
    o.world = world, o.max_tokens = max_tokens, o.redundant_experts = redundant, o.path = path;
    if (world == 1) ranks.push_back(Runtime::create(config, o));
    else ranks = Runtime::create_ranks(config, o);
    for (auto& rt : ranks) streams.push_back(rt->device().create_stream());
  }
  ~SharedGroup() {
    for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r]->device().destroy_stream(streams[r]);
  }
  int world() const { return int(ranks.size()); }
  const ModelShape& model() const { return ranks[0]->config().model; }

  // Rank r's weights: the routed experts of `pool` that `slots` names, then the shared ones.
  std::vector<std::unique_ptr<PreparedWeights>> prepare(const Mxfp4ExpertWeights& pool, const std::vector<int>& slots,
                                                        const Mxfp4ExpertWeights& shared) {
    std::vector<std::unique_ptr<PreparedWeights>> w;
    const int per = model().experts_per_rank;
    for (int r = 0; r < world(); ++r)
      w.push_back(ranks[r]->prepare_weights(append_experts(
          gather_experts(pool, std::vector<int>(slots.begin() + r * per, slots.begin() + (r + 1) * per)), shared)));
    return w;
  }

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
                        static_cast<const float*>(calls[r].bufs.weights.get()), calls[r].bufs.y.get(),
                        calls[r].logical.tokens, streams[r]);
    for (int r = 0; r < world(); ++r) ranks[r]->device().synchronize(streams[r]);
  }

  // Every rank's output against the references over the logical experts and `shared`.
  // ref_tokens: tokens of each rank's call the references cover (at random past it).
  void check(std::vector<Call>& calls, const Mxfp4ExpertWeights& logical, const Mxfp4ExpertWeights& shared,
             std::mt19937_64& rng, const std::string& what, std::size_t ref_tokens = 64) {
    std::vector<std::vector<std::uint16_t>> ys(world());
    std::vector<workload::RankOutput> outs;
    for (int r = 0; r < world(); ++r) {
      ys[r] = read_y(ranks[r]->device(), calls[r]);
      outs.push_back({&calls[r].x, &calls[r].logical, &ys[r]});
    }
    const auto results = workload::check_group(ranks[0]->config(), logical, model().logical_experts, outs, ref_tokens, rng,
                                               ranks[0]->arithmetic(std::max<std::int64_t>(calls[0].logical.tokens, 1)),
                                               &shared);
    for (int r = 0; r < world(); ++r)
      if (calls[r].logical.tokens > 0)
        require_bars(results[r], fmt::format("{}: rank {}/{}, {} tokens", what, r, world(), calls[r].logical.tokens));
  }
};

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

TEST_CASE("Shared experts on one GPU, every path: the references add them; a bad id's slot named as the caller "
          "numbers it",
          "[gpu][shared]") {
  struct Case {
    Config config;
    int shared;
    float scale;
    KernelPath path;
    std::vector<std::int64_t> sizes;
  };
  const Config kimi = with_experts(load_config("kimi_k3_a8w4"), 112);
  const Config kimi16 = with_experts(load_config("kimi_k3_a8w4"), 16);
  for (const Case& c : {Case{kimi, 1, 1.f, KernelPath::automatic, {1, 64, 512}},
                        Case{load_config("gpt_oss_20b_a8w4"), 2, 0.5f, KernelPath::automatic, {1, 100}},
                        Case{kimi16, 2, 1.f, KernelPath::tensor_core, {1, 37}},
                        Case{kimi16, 1, 2.f, KernelPath::portable, {1, 37}}}) {
    std::mt19937_64 rng(41);
    SharedGroup g(with_shared_experts(c.config, c.shared, c.scale), 1, 512, 0, c.path);
    const ModelShape& m = g.model();
    REQUIRE(m.shared_experts == c.shared);
    const Mxfp4ExpertWeights routed = workload::random_group_weights(m, 1, 5);
    const Mxfp4ExpertWeights shared = workload::random_shared_weights(m, 5);
    const auto weights = g.prepare(routed, iota(m.experts), shared);
    for (std::int64_t tokens : c.sizes) {
      workload::Routing route = workload::make_routing("uniform", tokens, m.topk, m.experts, rng);
      const bool plant = tokens > 2;
      if (plant) route.ids[2 * m.topk + 1] = m.experts + 5, route.ids[2 * m.topk + 2] = -1;  // bad, then empty
      std::vector<Call> calls;
      calls.push_back(g.input(0, route, iota(m.experts), rng));
      g.launch(calls, weights);
      g.check(calls, routed, shared, rng,
              fmt::format("{} + {} shared (weight {}), {} path", c.config.name, c.shared, c.scale,
                          to_string(g.ranks[0]->path())));
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
  const Config config = with_shared_experts(cli::load_for_world("kimi_k3_a8w4", 4, 28), 1);  // 112 experts + 1 shared
  for (int redundant : {0, 16}) {
    SharedGroup g(config, 4, 512, redundant);
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
    const auto weights = g.prepare(logical, placement, shared);
    // With redundant slots a shorter run: the routing and slots are what it adds.
    for (std::int64_t tokens : redundant ? std::vector<std::int64_t>{1, 64} : std::vector<std::int64_t>{1, 64, 512}) {
      for (bool serial : {false, true}) {
        if (serial && (tokens != 64 || redundant)) continue;
        for (auto& rt : g.ranks) rt->set_serial(serial);
        std::vector<Call> calls;
        long long planted = 0;
        for (int r = 0; r < 4; ++r) {
          const std::int64_t t = tokens == 64 && r == 3 ? 0 : tokens;  // rank 3 idle at 64
          workload::Routing route = workload::make_routing("zipf", t, m.topk, m.logical_experts, rng);
          if (t > 1 && r == 1) route.ids[3] = m.logical_experts + 2, ++planted;
          calls.push_back(g.input(r, std::move(route), placement, rng));
        }
        g.launch(calls, weights);
        g.check(calls, logical, shared, rng,
                fmt::format("+1 shared, {} redundant slots{}", redundant, serial ? ", serial" : ""), 24);
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
    std::vector<Call> calls;
    for (int r = 0; r < 4; ++r)
      calls.push_back(g.input(r, workload::make_routing("uniform", 64, m.topk, m.logical_experts, rng), placement, rng));
    g.launch(calls, weights);
    g.check(calls, logical, other, rng, "after the shared expert's replacement", 24);
    for (auto& rt : g.ranks) CHECK_FALSE(rt->take_errors().any());
  }
}
