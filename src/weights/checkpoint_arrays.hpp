// A checkpoint's expert tensors as host arrays with their shapes, checked against the layout it
// names and turned into the library's: W1 as halves (each expert's gate rows, then its up rows),
// W2 [E][D][...], biases float32, b1 as W1. MXFP4 tensors (packed values and e8m0 scales) and
// dense ones (fp32 or bf16 weights, quantized later) alike. load_checkpoint goes through it, and so
// does Python's Layer.load_weights (the extension's checkpoint_to_halves): one copy of the layouts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "megamoe/weights.hpp"

namespace megamoe {

// One host array as the caller gave it: contiguous and row-major; null data where not given.
struct HostArrayView {
  std::string name;  // as the caller calls it, for errors: "w1", "w1[0] (gate)", ...
  const void* data = nullptr;
  std::vector<std::int64_t> shape;
  int element_bytes = 1;
  bool given() const { return data != nullptr; }
};

// A checkpoint's arrays by the role they play; see CheckpointTensors (weights.hpp) for each
// layout's. MXFP4 where w1_scales is given, dense (element_bytes 4: fp32, 2: bf16) otherwise;
// dense gpt_oss takes transformers' GptOssExperts parameters (gate_up_proj [E][D][2I], x @ W,
// the output axis interleaved; down_proj [E][I][D]). up_b1: separate_gate_up's up bias [E][I]
// where b1 holds gate's [E][I] (else b1 is [E][2I], gate then up).
struct CheckpointArrays {
  HostArrayView w1, w1_scales, up, up_scales, w2, w2_scales, b1, up_b1, b2;
};

// The library's layout, as bytes: w1 [E][2I][D/2] and w2 [E][D][I/2] with their scales (MXFP4),
// or w1 [E][2I][D] and w2 [E][D][I] of element_bytes each (dense, no scales); biases empty for none.
struct HalvesArrays {
  bool mxfp4 = true;
  int element_bytes = 1;
  std::vector<std::uint8_t> w1, w1_scales, w2, w2_scales;
  std::vector<float> b1, b2;
};

// What the arrays hold: MXFP4 (bytes, with scales) or dense weights of element_bytes.
struct CheckpointForm {
  bool mxfp4 = true;
  int element_bytes = 1;
};

// The arrays checked against `layout`, nothing copied. Throws InputError naming the array, its
// shape and the layout's shape for it (with what the checkpoint calls it), an array the layout
// does not take, a missing one, a bias without the other; an Error for dims off the MXFP4 blocks.
CheckpointForm check_checkpoint(CheckpointLayout layout, int experts, int model_dim, int inter_dim,
                                const CheckpointArrays& arrays);

// check_checkpoint, then the arrays in the library's layout (copied).
HalvesArrays checkpoint_to_halves(CheckpointLayout layout, int experts, int model_dim, int inter_dim,
                                  const CheckpointArrays& arrays);

// MXFP4 halves as the library's weights (an Error for dense ones).
Mxfp4ExpertWeights weights_from_halves(HalvesArrays halves, int experts, int model_dim, int inter_dim);

}  // namespace megamoe
