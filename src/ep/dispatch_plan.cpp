#include "ep/dispatch_plan.hpp"

#include <algorithm>

namespace megamoe {

std::vector<RankPlan> dispatch_plan(const std::vector<std::vector<int>>& ids, int topk, int experts,
                                    long long capacity) {
  const int W = int(ids.size()), E = experts, G = W * E;
  std::vector<RankPlan> plan(W);
  // Sources: rows per global expert in slot order, token rows per destination in token order.
  std::vector<std::vector<int>> rank_in_expert(W);
  for (int s = 0; s < W; ++s) {
    RankPlan& p = plan[s];
    const int tokens = int(ids[s].size()) / topk;
    p.dest_row.assign(std::size_t(tokens) * W, -1);
    p.sent.assign(std::size_t(W) * (E + 1), 0);
    rank_in_expert[s].assign(ids[s].size(), -1);
    std::vector<int> next_rank(G, 0), next_row(W, 0);
    for (int t = 0; t < tokens; ++t) {
      std::vector<bool> to(W, false);
      for (int k = 0; k < topk; ++k) {
        const int id = ids[s][std::size_t(t) * topk + k];
        if (id >= 0 && id < G) {
          rank_in_expert[s][std::size_t(t) * topk + k] = next_rank[id]++;
          ++p.sent[std::size_t(id / E) * (E + 1) + id % E];
          to[id / E] = true;
        } else if (id != -1) {
          ++p.bad_ids;
        }
      }
      for (int d = 0; d < W; ++d)
        if (to[d]) p.dest_row[std::size_t(t) * W + d] = next_row[d]++, ++p.sent[std::size_t(d) * (E + 1) + E];
    }
  }
  // Receivers: expert by expert, source by source within an expert, capped.
  for (int d = 0; d < W; ++d) {
    RankPlan& p = plan[d];
    p.expert_offsets.assign(E + 1, 0);
    p.segment.assign(std::size_t(E) * W, 0);
    p.segment_rows.assign(std::size_t(E) * W, 0);
    long long start = 0;
    for (int e = 0; e < E; ++e) {
      p.expert_offsets[e] = int(std::min(start, capacity));
      for (int s = 0; s < W; ++s) {
        const int c = plan[s].sent[std::size_t(d) * (E + 1) + e];
        p.segment[std::size_t(e) * W + s] = int(start);
        p.segment_rows[std::size_t(e) * W + s] = int(std::clamp<long long>(capacity - start, 0, c));
        p.dropped += c - p.segment_rows[std::size_t(e) * W + s];
        start += c;
      }
    }
    p.expert_offsets[E] = int(std::min(start, capacity));
  }
  for (int s = 0; s < W; ++s) {
    RankPlan& p = plan[s];
    p.placed.assign(ids[s].size(), -1);
    for (std::size_t i = 0; i < ids[s].size(); ++i) {
      const int id = ids[s][i];
      if (id < 0 || id >= G) continue;
      const int d = id / E, e = id % E, rank = rank_in_expert[s][i];
      if (rank < plan[d].segment_rows[std::size_t(e) * W + s])
        p.placed[i] = (long long)d << 32 | (plan[d].segment[std::size_t(e) * W + s] + rank);
    }
  }
  return plan;
}

}  // namespace megamoe
