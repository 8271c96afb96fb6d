// The host model of a call's dispatch plan (src/ep/dispatch_plan.hpp) against brute force: every
// slot's receiver and routed row found by sorting all of a receiver's rows by (expert, source,
// slot), for random groups and routings, with empty and bad slots and a capacity that drops rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <tuple>

#include "ep/dispatch_plan.hpp"

using namespace megamoe;

namespace {

struct Case {
  int world, experts, topk;
  std::vector<int> tokens;  // per rank
  long long capacity;
};

std::vector<std::vector<int>> random_ids(const Case& c, std::mt19937& rng) {
  const int G = c.world * c.experts;
  std::vector<std::vector<int>> ids(c.world);
  for (int r = 0; r < c.world; ++r)
    for (int i = 0; i < c.tokens[r] * c.topk; ++i) {
      const int u = int(rng() % 100);
      // mostly valid ids, a few empty and bad, and some piled on rank 0's first expert
      ids[r].push_back(u < 10 ? -1 : u < 14 ? (u % 2 ? G + int(rng() % 5) : -2 - int(rng() % 5))
                                 : u < 30 ? 0
                                          : int(rng() % G));
    }
  return ids;
}

}  // namespace

TEST_CASE("the dispatch plan places every slot where sorting all rows puts it", "[ep]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    Case c;
    c.world = 1 + int(rng() % 8);
    c.experts = 1 + int(rng() % 6);
    c.topk = 1 + int(rng() % 5);
    for (int r = 0; r < c.world; ++r) c.tokens.push_back(rng() % 5 == 0 ? 0 : int(rng() % 40));
    const long long worst = (long long)c.world * 40 * c.topk;
    c.capacity = rng() % 3 == 0 ? 1 + (long long)(rng() % 30) : worst;
    const auto ids = random_ids(c, rng);
    INFO("trial " << trial << ": world " << c.world << ", experts " << c.experts << ", topk " << c.topk
                  << ", capacity " << c.capacity);
    const std::vector<RankPlan> plan = dispatch_plan(ids, c.topk, c.experts, c.capacity);
    REQUIRE(int(plan.size()) == c.world);
    const int G = c.world * c.experts;
    for (int d = 0; d < c.world; ++d) {
      // brute force: every row d receives, sorted by (expert, source, slot)
      std::vector<std::tuple<int, int, int>> rows;
      for (int s = 0; s < c.world; ++s)
        for (int i = 0; i < int(ids[s].size()); ++i)
          if (ids[s][i] >= 0 && ids[s][i] < G && ids[s][i] / c.experts == d) rows.emplace_back(ids[s][i] % c.experts, s, i);
      std::sort(rows.begin(), rows.end());
      long long dropped = 0;
      for (int p = 0; p < int(rows.size()); ++p) {
        const auto [e, s, i] = rows[p];
        const long long want = p < c.capacity ? ((long long)d << 32 | p) : -1;
        dropped += p >= c.capacity;
        CHECK(plan[s].placed[i] == want);
      }
      CHECK(plan[d].dropped == dropped);
      for (int e = 0; e <= c.experts; ++e) {
        const long long first = std::lower_bound(rows.begin(), rows.end(), std::make_tuple(e, -1, -1)) - rows.begin();
        CHECK(plan[d].expert_offsets[e] == std::min(first, c.capacity));
      }
    }
    for (int s = 0; s < c.world; ++s) {
      long long bad = 0;
      for (int id : ids[s]) bad += id != -1 && (id < 0 || id >= G);
      CHECK(plan[s].bad_ids == bad);
      // a token's row at each destination: its place among the source's tokens that go there
      std::vector<int> next(c.world, 0);
      for (int t = 0; t < c.tokens[s]; ++t)
        for (int d = 0; d < c.world; ++d) {
          bool goes = false;
          for (int k = 0; k < c.topk; ++k) {
            const int id = ids[s][t * c.topk + k];
            goes |= id >= 0 && id < G && id / c.experts == d;
          }
          CHECK(plan[s].dest_row[t * c.world + d] == (goes ? next[d]++ : -1));
        }
      for (int d = 0; d < c.world; ++d) CHECK(plan[s].sent[d * (c.experts + 1) + c.experts] == next[d]);
    }
  }
}
