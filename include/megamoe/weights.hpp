// Expert weights in MXFP4 (OCP MX: e2m1 values two per byte, one e8m0 scale per 32 values
// along K), as checkpoints ship them, and their quantization from fp32 or bf16.
// Runtime::prepare_weights() turns them into the layout the kernels read (docs/layer.md).
#pragma once
#include <cstdint>
#include <vector>

namespace megamoe {

struct Mxfp4ExpertWeights {
  int experts = 0, model_dim = 0, inter_dim = 0;
  // W1 [experts][2 * inter_dim][model_dim]: rows 0..I-1 are gate, I..2I-1 up; K = model_dim.
  std::vector<std::uint8_t> w1_packed;  // [experts][2I][D/2], element 2j in the low nibble
  std::vector<std::uint8_t> w1_scales;  // [experts][2I][D/32], e8m0
  // W2 [experts][model_dim][inter_dim]; K = inter_dim.
  std::vector<std::uint8_t> w2_packed;  // [experts][D][I/2]
  std::vector<std::uint8_t> w2_scales;  // [experts][D][I/32]

  // Allocates zeroed tensors of the right sizes.
  static Mxfp4ExpertWeights zeros(int experts, int model_dim, int inter_dim);
  // Throws megamoe::Error naming the field, its value and what was expected.
  void check() const;
};

// MXFP4 weights from a checkpoint that stores gate and up as two tensors (compressed-tensors'
// mxfp4-pack-quantized, as Kimi checkpoints ship them; docs/layer.md, "Checkpoint layouts"):
// gate_packed and up_packed [experts][inter_dim][model_dim/2], their scales
// [experts][inter_dim][model_dim/32], W2 as above; joined into W1's halves (gate rows first).
Mxfp4ExpertWeights join_gate_up(int experts, int model_dim, int inter_dim, const std::uint8_t* gate_packed,
                                const std::uint8_t* gate_scales, const std::uint8_t* up_packed,
                                const std::uint8_t* up_scales, const std::uint8_t* w2_packed,
                                const std::uint8_t* w2_scales);

// Quantizes fp32 / bf16 expert weights (same shapes as above, unpacked) to MXFP4.
Mxfp4ExpertWeights quantize_expert_weights(const float* w1, const float* w2, int experts, int model_dim,
                                           int inter_dim);
Mxfp4ExpertWeights quantize_expert_weights_bf16(const std::uint16_t* w1, const std::uint16_t* w2, int experts,
                                                int model_dim, int inter_dim);

}  // namespace megamoe
