// Runtime::prepare_replacement and Runtime::replace_experts: expert weights replaced in place
// (EPLB rebalancing, weight updates), checked on the host, copied on the caller's stream.
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "megamoe/errors.hpp"
#include "megamoe/runtime.hpp"
#include "weights/prepare_weights.hpp"

namespace megamoe {

std::unique_ptr<PreparedWeights> Runtime::prepare_replacement(const Mxfp4ExpertWeights& experts) {
  return megamoe::prepare_weights(*device_, config_, path_, options_.max_tokens, experts, true);
}

void Runtime::replace_experts(PreparedWeights& w, const std::vector<int>& slots, const PreparedWeights& r,
                              StreamHandle stream) {
  const int routed = config_.model.experts_per_rank, shared = config_.model.shared_experts, held = routed + shared;
  if (w.path != path_ || r.path != path_)
    throw Error(fmt::format("megamoe: replace_experts: weights for the {} path and a replacement for the {} path, this "
                            "runtime runs {}",
                            to_string(w.path), to_string(r.path), to_string(path_)));
  if (w.experts != held || w.model_dim != r.model_dim || w.inter_dim != r.inter_dim)
    throw Error(fmt::format("megamoe: replace_experts: weights of {} experts x {} x {} and a replacement of {} x {}, "
                            "expected this rank's {} experts and one shape",
                            w.experts, w.model_dim, w.inter_dim, r.model_dim, r.inter_dim, held));
  if (int(slots.size()) != r.experts)
    throw Error(fmt::format("megamoe: replace_experts: {} slots for a replacement of {} experts, expected one slot each",
                            slots.size(), r.experts));
  std::vector<int> seen(held, -1);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0 || slots[i] >= held)
      throw Error(fmt::format("megamoe: replace_experts: slots[{}] = {}, expected 0..{} (this rank's slots)", i,
                              slots[i], held - 1));
    if (seen[slots[i]] >= 0)
      throw Error(fmt::format("megamoe: replace_experts: slots[{}] and slots[{}] are both {}, expected each slot once",
                              seen[slots[i]], i, slots[i]));
    seen[slots[i]] = int(i);
  }
  for (auto [name, a, b] : {std::tuple{"w1 (v1)", &w.w1_packed, &r.w1_packed}, {"w1 (v3)", &w.w1_units, &r.w1_units},
                            {"w1 (fp8-resident)", &w.w1_resident, &r.w1_resident}, {"b1", &w.b1, &r.b1}})
    if ((a->get() == nullptr) != (b->get() == nullptr) ||
        (a->get() && a->bytes() / std::size_t(w.experts) != b->bytes() / std::size_t(r.experts)))
      throw Error(fmt::format("megamoe: replace_experts: the weights {} {} and the replacement {}: prepare it with this "
                              "runtime's prepare_replacement",
                              a->get() ? "have" : "lack", name, b->get() ? "has it" : "lacks it"));
  // The weights hold the shared experts first (config/shared_slots.hpp); slots name them as the caller
  // gave them to prepare_weights, the routed experts first.
  std::vector<int> held_at(slots);
  for (int& s : held_at) s = s < routed ? shared + s : s - routed;
  copy_expert_slots(*device_, w, held_at, r, stream);
}

}  // namespace megamoe
