#include "runtime/slot_group.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <catch2/catch.hpp>
#include <fmt/format.h>

namespace megamoe::test {

SlotGroup::SlotGroup(const Config& config, int world, int max_tokens, int redundant, KernelPath path) {
  RuntimeOptions o;
  o.world = world, o.max_tokens = max_tokens, o.redundant_experts = redundant, o.path = path;
  if (world == 1) ranks.push_back(Runtime::create(config, o));
  else ranks = Runtime::create_ranks(config, o);
  for (auto& rt : ranks) streams.push_back(rt->device().create_stream());
}

SlotGroup::~SlotGroup() {
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r]->device().destroy_stream(streams[r]);
}

std::vector<std::unique_ptr<PreparedWeights>> SlotGroup::prepare(const Mxfp4ExpertWeights& pool,
                                                                 const std::vector<int>& slots,
                                                                 const Mxfp4ExpertWeights* shared) {
  std::vector<std::unique_ptr<PreparedWeights>> w;
  const int per = model().experts_per_rank;
  for (int r = 0; r < world(); ++r) {
    Mxfp4ExpertWeights held = gather_experts(pool, std::vector<int>(slots.begin() + r * per, slots.begin() + (r + 1) * per));
    w.push_back(ranks[r]->prepare_weights(shared ? append_experts(held, *shared) : held));
  }
  return w;
}

SlotCall SlotGroup::input(int r, workload::Routing logical, const std::vector<int>& placement, std::mt19937_64& rng,
                          workload::InputKind kind) {
  const ModelShape& m = model();
  SlotCall c;
  c.physical = workload::to_physical(logical, placement, m.logical_experts, rng);
  c.logical = std::move(logical);
  c.x = kind == workload::InputKind::normal ? workload::random_bf16(c.logical.tokens, m.model_dim, rng)
                                            : workload::random_inputs(kind, c.logical.tokens, m.model_dim, rng).x;
  c.bufs = upload_call(ranks[r]->device(), c.x, c.physical, 256);
  return c;
}

void SlotGroup::launch(std::vector<SlotCall>& calls, const std::vector<std::unique_ptr<PreparedWeights>>& w) {
  for (int r = 0; r < world(); ++r)
    ranks[r]->forward(*w[r], calls[r].bufs.x.get(), static_cast<const int*>(calls[r].bufs.ids.get()),
                      static_cast<const float*>(calls[r].bufs.weights.get()), calls[r].bufs.y.get(),
                      calls[r].logical.tokens, streams[r]);
}

void SlotGroup::sync() {
  for (int r = 0; r < world(); ++r) ranks[r]->device().synchronize(streams[r]);
}

void SlotGroup::check(std::vector<SlotCall>& calls, const Mxfp4ExpertWeights& logical, std::mt19937_64& rng,
                      const std::string& what, std::size_t ref_tokens, const Mxfp4ExpertWeights* shared) {
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
  const auto results =
      workload::check_group(ranks[0]->config(), logical, model().logical_experts, outs, ref_tokens, rng,
                            ranks[0]->arithmetic(std::max<std::int64_t>(calls[0].logical.tokens, 1)), shared);
  for (int r = 0; r < world(); ++r) {
    if (calls[r].logical.tokens == 0) continue;
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

std::vector<int> iota(int n, int first) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace megamoe::test
