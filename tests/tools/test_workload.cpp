// Workloads of the tools and GPU tests: the routings, the routing file format, the inputs' and
// weights' seeds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "common/workload.hpp"
#include "megamoe/errors.hpp"
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
  CHECK_THROWS_WITH(workload::make_routing("zipf", T, K, E, rng), Catch::Contains("unknown routing 'zipf'"));
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
  const ModelShape m{.experts_per_rank = 3, .model_dim = 256, .inter_dim = 160, .topk = 2};
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
