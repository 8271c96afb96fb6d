// Workloads of the tools and GPU tests: the routings, the routing file format, the inputs' and
// weights' seeds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/workload.hpp"
#include "formats/formats.hpp"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"
#include "reference/moe_reference.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("routings have the shape their name promises", "[workload]") {
  std::mt19937_64 rng(1);
  const int E = 40, K = 6, T = 500;
  auto u = workload::make_routing("uniform", T, K, E, rng);
  for (int t = 0; t < T; ++t) {
    std::set<int> ids(u.ids.begin() + t * K, u.ids.begin() + (t + 1) * K);
    CHECK(ids.size() == std::size_t(K));  // distinct
    CHECK(*ids.begin() >= 0);
    CHECK(*ids.rbegin() < E);
    float sum = 0;
    for (int k = 0; k < K; ++k) {
      sum += u.weights[t * K + k];
      CHECK(u.weights[t * K + k] > 0.f);
    }
    CHECK(sum == Approx(1.f).epsilon(1e-5));
  }
  for (int id : workload::make_routing("single", T, K, E, rng).ids) CHECK(id == 0);
  for (int id : workload::make_routing("sparse", T, K, E, rng).ids) CHECK((id >= 0 && id < K + 4));
  auto holes = workload::make_routing("holes", T, K, E, rng);
  std::size_t empty = 0;
  for (int id : holes.ids) {
    empty += id == -1;
    CHECK((id >= -1 && id < E));
  }
  CHECK(empty > holes.ids.size() / 5);
  auto bad = workload::make_routing("bad", T, K, E, rng);
  int outside = 0;
  for (int id : bad.ids) outside += id < -1 || id >= E;
  CHECK(outside == bad.planted_bad_ids);
  CHECK(outside > 0);
  // ramp over 40 experts and 500 x 6 slots: expert e takes 2e + 1 rows (1600 in all), each token's
  // experts distinct, the other slots empty
  auto ramp = workload::make_routing("ramp", T, K, E, rng);
  std::vector<int> rows(E, 0);
  int empty_slots = 0;
  for (int t = 0; t < T; ++t) {
    std::set<int> seen;
    for (int k = 0; k < K; ++k) {
      const int id = ramp.ids[t * K + k];
      if (id == -1) {
        ++empty_slots;
        continue;
      }
      CHECK(seen.insert(id).second);
      ++rows.at(id);
    }
  }
  for (int e = 0; e < E; ++e) CHECK(rows[e] == 2 * e + 1);
  CHECK(empty_slots == T * K - E * E);
  auto short_ramp = workload::make_routing("ramp", 10, 2, E, rng);  // 20 slots: 1 + 3 + 5 + 7, and 4 of expert 4
  CHECK(std::count(short_ramp.ids.begin(), short_ramp.ids.end(), 4) == 4);
  CHECK(std::count(short_ramp.ids.begin(), short_ramp.ids.end(), -1) == 0);
  CHECK_THROWS_WITH(workload::make_routing("pareto", T, K, E, rng), Catch::Contains("unknown routing 'pareto'"));
}

TEST_CASE("routing files: write, read back exactly, and name what is wrong", "[workload]") {
  test::TempDir dir;
  std::mt19937_64 rng(2);
  auto r = workload::make_routing("holes", 37, 5, 20, rng);
  auto path = (dir.path() / "r.routing").string();
  workload::write_routing(r, path);
  auto back = workload::read_routing(path);
  CHECK(back.tokens == 37);
  CHECK(back.topk == 5);
  CHECK(back.ids == r.ids);
  CHECK(back.weights == r.weights);  // 9 significant digits round-trip a float

  test::write_text(dir.path() / "bad_header", "routing 1\ntokens 1 topk 1\n0 1\n");
  CHECK_THROWS_WITH(workload::read_routing((dir.path() / "bad_header").string()), Catch::Contains("megamoe-routing 1"));
  test::write_text(dir.path() / "short", "megamoe-routing 1\ntokens 2 topk 2\n0 1 0.5 0.5\n3\n");
  CHECK_THROWS_WITH(workload::read_routing((dir.path() / "short").string()), Catch::Contains("token 1"));
  CHECK_THROWS_WITH(workload::read_routing((dir.path() / "missing").string()), Catch::Contains("cannot read"));
}

TEST_CASE("a call's inputs come from the seed, its size and its draw alone", "[workload]") {
  auto first = [](std::uint64_t seed, std::int64_t tokens, int draw) {
    std::mt19937_64 rng = workload::inputs_rng(seed, tokens, draw);
    return rng();
  };
  CHECK(first(123, 8, 0) == first(123, 8, 0));
  std::set<std::uint64_t> distinct = {first(123, 8, 0), first(123, 8, 1), first(123, 9, 0), first(124, 8, 0),
                                      first(123, 8LL << 32, 0)};
  CHECK(distinct.size() == 5);
}

// FNV-1a of the bytes: the weights a seed gives are pinned (the GPU tests' and tools' results
// were measured on them).
static std::uint64_t fnv1a(const std::vector<std::uint8_t>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint8_t b : v) h = (h ^ b) * 1099511628211ull;
  return h;
}

TEST_CASE("random weights are the same bytes for the same seed, one rank and a group", "[workload]") {
  const ModelShape m{.experts = 3, .experts_per_rank = 3, .model_dim = 256, .inter_dim = 160, .topk = 2};
  auto hashes = [](const Mxfp4ExpertWeights& w) {
    return std::vector<std::uint64_t>{fnv1a(w.w1_packed), fnv1a(w.w1_scales), fnv1a(w.w2_packed), fnv1a(w.w2_scales)};
  };
  CHECK(hashes(workload::random_weights(m, 7)) ==
        std::vector<std::uint64_t>{0xe8ad363f334b3aebull, 0xffe3c34cc4c328ceull, 0x49c4246d7dc8937full,
                                   0x94f961d668b33588ull});
  CHECK(hashes(workload::random_group_weights(m, 2, 5)) ==
        std::vector<std::uint64_t>{0xb32d8ebbf1426ddfull, 0x6a94ab24aac5b3a7ull, 0xa116fe0caf139f8dull,
                                   0xb85c4f5802ed320eull});
}

TEST_CASE("input workloads: normal is N(0, 1) as before; outliers and massive carry what they promise", "[workload]") {
  const std::int64_t T = 300;
  const int D = 2048;
  std::mt19937_64 a(5), b(5);
  CHECK(workload::random_inputs(workload::InputKind::normal, T, D, a).x == workload::random_bf16(T, D, b));

  // A channel's median |value| over the tokens (robust to the tails): for t(4) at unit variance
  // about 0.52, for N(0, 1) 0.67.
  auto median_abs = [&](const std::vector<std::uint16_t>& x, int c, const std::vector<std::int64_t>& skip = {}) {
    std::vector<float> v;
    for (std::int64_t t = 0; t < T; ++t)
      if (std::find(skip.begin(), skip.end(), t) == skip.end()) v.push_back(std::fabs(formats::bf16_to_float(x[t * D + c])));
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  std::mt19937_64 rng(9);
  const workload::Inputs o = workload::random_inputs(workload::InputKind::outliers, T, D, rng);
  REQUIRE(o.outlier_channels.size() == std::size_t(workload::outlier_channels(D)));
  CHECK(o.massive_tokens.empty());
  CHECK(o.massive_channel == -1);
  for (int c = 0; c < D; ++c) {
    const bool outlier = std::count(o.outlier_channels.begin(), o.outlier_channels.end(), c) > 0;
    const double r = median_abs(o.x, c) / (outlier ? workload::kOutlierScale : 1.f);
    INFO("channel " << c << " median |x| / scale " << r);
    CHECK((r > 0.35 && r < 0.75));
  }
  // Heavy tails: |v| > 6 sigma is some 1e-3 of a t(4) of unit variance, and never for N(0, 1).
  std::size_t far = 0;
  for (std::int64_t t = 0; t < T; ++t)
    for (int c = 0; c < D; ++c)
      if (std::count(o.outlier_channels.begin(), o.outlier_channels.end(), c) == 0)
        far += std::fabs(formats::bf16_to_float(o.x[t * D + c])) > 6.f;
  CHECK(far > 50);

  const workload::Inputs m = workload::random_inputs(workload::InputKind::massive, T, D, rng);
  REQUIRE(m.massive_channel >= 0);
  CHECK(std::count(m.outlier_channels.begin(), m.outlier_channels.end(), m.massive_channel) == 0);
  REQUIRE(m.massive_tokens.size() == std::size_t((T - m.massive_tokens[0] + workload::kMassiveEvery - 1) /
                                                 workload::kMassiveEvery));
  CHECK(m.massive_tokens[0] < workload::kMassiveEvery);
  for (std::size_t i = 0; i < m.massive_tokens.size(); ++i) {
    const float v = std::fabs(formats::bf16_to_float(m.x[m.massive_tokens[i] * D + m.massive_channel]));
    CHECK(v == Approx(i % 2 ? 10000.f : 1000.f).epsilon(0.01));  // bf16 holds 10000 to 8 bits
  }
  CHECK(median_abs(m.x, m.massive_channel, m.massive_tokens) < 0.75);  // the other tokens' value there is ordinary
  std::mt19937_64 one(3);
  CHECK(workload::random_inputs(workload::InputKind::massive, 1, D, one).massive_tokens ==
        std::vector<std::int64_t>{0});  // every call has one

  CHECK(workload::parse_input_kind("outliers") == workload::InputKind::outliers);
  CHECK_THROWS_WITH(workload::parse_input_kind("gaussian"), Catch::Contains("'gaussian'") && Catch::Contains("massive"));
}

TEST_CASE("a check always covers the massive tokens and reports each against both references", "[workload]") {
  Config cfg = load_config("generic_a8w4");
  cfg.model = ModelShape{.experts = 4, .experts_per_rank = 4, .model_dim = 256, .inter_dim = 128, .topk = 2};
  const Mxfp4ExpertWeights w = workload::random_weights(cfg.model, 11);
  std::mt19937_64 rng(2);
  const std::int64_t T = 200;
  const workload::Inputs in = workload::random_inputs(workload::InputKind::massive, T, cfg.model.model_dim, rng);
  const workload::Routing r = workload::make_routing("uniform", T, cfg.model.topk, cfg.model.experts_per_rank, rng);
  const PathArithmetic arith{32, 32, Accumulation::exact};
  // y: the emulating reference's own bf16 values, so that its relL2 is 0 on every checked token.
  reference::LayerInputs li;
  li.weights = &w, li.activation = cfg.activation, li.wire = cfg.bucket_for_tokens(T).combine_wire;
  li.x_block = arith.x, li.h_block = arith.h, li.accumulation = arith.accumulation, li.topk = cfg.model.topk;
  li.x = in.x.data(), li.ids = r.ids.data(), li.route_weights = r.weights.data();
  std::vector<std::int64_t> all(T);
  std::iota(all.begin(), all.end(), 0);
  const reference::LayerOutputs ref = reference::reference_layer(li, all);
  std::vector<std::uint16_t> y(ref.emulated.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = formats::float_to_bf16(ref.emulated[i]);

  REQUIRE(in.massive_tokens.size() >= 3);
  const workload::CheckResult c = workload::check_layer(cfg, w, in.x, r, y, 2, rng, arith, &in.massive_tokens);
  CHECK(c.subset);
  CHECK(c.checked_tokens >= in.massive_tokens.size());
  CHECK(c.checked_tokens <= in.massive_tokens.size() + 2);
  REQUIRE(c.massive.size() == in.massive_tokens.size());
  for (std::size_t i = 0; i < c.massive.size(); ++i) {
    const workload::TokenCheck& tc = c.massive[i];
    CHECK(tc.token == in.massive_tokens[i]);
    CHECK(tc.rel_l2_emulated == 0.0);
    const std::int64_t t = tc.token;
    const std::size_t D = cfg.model.model_dim;
    CHECK(tc.rel_l2_exact == Approx(reference::rel_l2(ref.emulated.data() + t * D, ref.exact.data() + t * D, D)));
    CHECK(tc.rel_l2_exact > 0.0);
  }
  CHECK(c.worst_token_emulated == 0.0);
  std::mt19937_64 rng2(2);
  CHECK(workload::check_layer(cfg, w, in.x, r, y, 2, rng2, arith).massive.empty());  // none asked for
}

TEST_CASE("zipf routing is skewed toward the first experts, distinct within a token", "[workload][eplb]") {
  std::mt19937_64 rng(5);
  const int E = 64, K = 8, T = 2000;
  const workload::Routing r = workload::make_routing("zipf", T, K, E, rng);
  for (int t = 0; t < T; ++t) {
    const std::set<int> ids(r.ids.begin() + t * K, r.ids.begin() + (t + 1) * K);
    REQUIRE(ids.size() == std::size_t(K));
    REQUIRE(*ids.begin() >= 0);
    REQUIRE(*ids.rbegin() < E);
  }
  const std::vector<long long> load = workload::expert_load(r, E);
  CHECK(std::accumulate(load.begin(), load.end(), 0LL) == T * K);
  CHECK(load[0] > 4 * load[E - 1]);  // weight 1 against 1/64, less what distinctness takes
  CHECK(load[0] >= load[E / 2]);
}

TEST_CASE("EPLB placement gives every expert a slot and the hottest the replicas; to_physical keeps each route's "
          "expert",
          "[workload][eplb]") {
  std::mt19937_64 rng(9);
  const int L = 48, P = 64, K = 6, T = 700;
  workload::Routing logical = workload::make_routing("zipf", T, K, L, rng);
  logical.ids[3] = -1;
  logical.ids[10] = L + 5;  // a bad id
  const std::vector<long long> load = workload::expert_load(logical, L);
  const std::vector<int> placement = workload::eplb_placement(L, P, load, rng);
  REQUIRE(placement.size() == std::size_t(P));
  std::vector<int> replicas(L, 0);
  for (int e : placement) {
    REQUIRE(e >= 0);
    REQUIRE(e < L);
    ++replicas[e];
  }
  for (int e = 0; e < L; ++e) CHECK(replicas[e] >= 1);
  CHECK(replicas[0] == *std::max_element(replicas.begin(), replicas.end()));  // expert 0 is the hottest
  CHECK(replicas[0] >= 2);
  // No replica went to an expert whose load per replica, one replica fewer, was below another's.
  for (int e = 0; e < L; ++e)
    for (int f = 0; f < L; ++f)
      if (replicas[e] > 1) CHECK(load[e] * replicas[f] >= load[f] * (replicas[e] - 1));

  const workload::Routing physical = workload::to_physical(logical, placement, L, rng);
  REQUIRE(physical.ids.size() == logical.ids.size());
  CHECK(physical.weights == logical.weights);
  std::set<int> used;
  for (std::size_t i = 0; i < logical.ids.size(); ++i) {
    const int l = logical.ids[i], p = physical.ids[i];
    if (l < 0) {
      CHECK(p == l);
    } else if (l >= L) {
      CHECK(p >= P);  // still outside the slots: skipped and counted as bad
    } else {
      REQUIRE(p >= 0);
      REQUIRE(p < P);
      CHECK(placement[p] == l);
      used.insert(p);
    }
  }
  for (int p = 0; p < P; ++p)  // every replica of expert 0 takes routes
    if (placement[p] == 0) CHECK(used.count(p) == 1);
}
