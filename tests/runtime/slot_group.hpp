// A layer's ranks for the GPU suites of expert slots (redundant slots, shared experts): one GPU
// (world 1) or loopback ranks, a stream each; each rank's weights from a pool of experts by slot;
// calls routed by logical id and sent by slot id; every rank's output against the references
// over the logical experts.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/layer_outputs.hpp"

namespace megamoe::test {

// One rank's call: its routing over the logical experts (the references') and over slots (the
// kernels'), x, and its buffers (y poisoned, 256 bytes past it too).
struct SlotCall {
  workload::Routing logical, physical;
  std::vector<std::uint16_t> x;
  CallBuffers bufs;
};

struct SlotGroup {
  std::vector<std::unique_ptr<Runtime>> ranks;
  std::vector<StreamHandle> streams;

  SlotGroup(const Config& config, int world, int max_tokens, int redundant = 0,
            KernelPath path = KernelPath::automatic);
  ~SlotGroup();
  int world() const { return int(ranks.size()); }
  const ModelShape& model() const { return ranks[0]->config().model; }

  // Rank r's weights: the experts of `pool` that `slots` names for its slots, then `shared` (the
  // model's shared experts) where given.
  std::vector<std::unique_ptr<PreparedWeights>> prepare(const Mxfp4ExpertWeights& pool, const std::vector<int>& slots,
                                                        const Mxfp4ExpertWeights* shared = nullptr);
  // Fresh inputs on rank r: `logical` routed to slots by `placement` (each slot's logical expert),
  // x drawn as `kind` (workload.hpp: N(0, 1), LLM-like outliers, or massive tokens too).
  SlotCall input(int r, workload::Routing logical, const std::vector<int>& placement, std::mt19937_64& rng,
                 workload::InputKind kind = workload::InputKind::normal);
  // Every rank's call on its stream, with no host sync.
  void launch(std::vector<SlotCall>& calls, const std::vector<std::unique_ptr<PreparedWeights>>& weights);
  void sync();
  // Waits, then every rank's output with tokens against the references over the `logical` weights
  // (and `shared`), over at most ref_tokens of its tokens: every element written, nothing past y,
  // the bars held.
  void check(std::vector<SlotCall>& calls, const Mxfp4ExpertWeights& logical, std::mt19937_64& rng,
             const std::string& what, std::size_t ref_tokens = 48, const Mxfp4ExpertWeights* shared = nullptr);
};

std::vector<int> iota(int n, int first = 0);

}  // namespace megamoe::test
