// Expert weights at a larger shape, padded with zeros: what a kernel path whose multiple the
// model's dims miss runs (config/path_requirements.hpp, padded_model). Zero rows and columns add
// nothing to either GEMM, and act(0, up) is 0 for every activation, so the model's outputs are
// unchanged; prepare_weights and the emulating reference both pad through this.
#pragma once
#include "megamoe/weights.hpp"

namespace megamoe {

// W1's gate rows, then its up rows, each half padded from inter_dim to `inter_dim` rows; every row
// from model_dim to `model_dim` values; W2 likewise; biases (if any) with them. Padded MX blocks
// take the least scale (e8m0 0, 2^-127) so that no row's largest scale changes.
Mxfp4ExpertWeights pad_expert_weights(const Mxfp4ExpertWeights& w, int model_dim, int inter_dim);

}  // namespace megamoe
