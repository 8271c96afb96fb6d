// The expert weights of a runtime uploaded in its kernels' layout (PreparedWeights, docs/layer.md):
// the checkpoint layout (v1) for the portable path, v3 for the tensor-core and Hopper paths, and
// the fp8-resident copy where a bucket the runtime can use reads it.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/weights.hpp"

namespace megamoe {

// Only the Hopper kernels read an fp8-resident copy, and only where the runtime's options allow it
// (RuntimeOptions::fp8_resident_weights): every other bucket of `config` is set to read the MXFP4
// weights.
void settle_weight_sources(Config& config, KernelPath path, bool fp8_resident_weights);

// Whether a bucket up to max_tokens' bucket reads the fp8-resident copy (settle_weight_sources
// has cleared it on other paths and where the options refuse it).
bool needs_fp8_resident_copy(const Config& config, int max_tokens);

// Device bytes prepare_weights allocates for one set of a rank's weights (experts_per_rank +
// shared_experts experts) of `config` on `path`: what each MoE layer of a model adds beside the
// runtime's one workspace. `config` as the runtime holds it (settle_weight_sources applied).
std::size_t prepared_weights_bytes(const Config& config, KernelPath path, int max_tokens);

// Checks the weights' shape against the config (megamoe::Error naming the field) and uploads them
// for `path` on `device`. experts: the count wanted (a rank's experts_per_rank; replacements any
// count from 1, `replacement` true).
std::unique_ptr<PreparedWeights> prepare_weights(Device& device, const Config& config, KernelPath path, int max_tokens,
                                                 const Mxfp4ExpertWeights& weights, bool replacement = false);

// Copies replacement's experts into `weights`' slots (replacement expert i into slots[i]) on
// `stream`: every buffer of the layout, one async device copy per slot and buffer.
void copy_expert_slots(Device& device, PreparedWeights& weights, const std::vector<int>& slots,
                       const PreparedWeights& replacement, StreamHandle stream);

}  // namespace megamoe
