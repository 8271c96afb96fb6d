// Expert weights in MXFP4 (OCP MX: e2m1 values two per byte, one e8m0 scale per 32 values
// along K), as checkpoints ship them, and their quantization from fp32 or bf16.
// Runtime::prepare_weights() turns them into the layout the kernels read (PreparedWeights below,
// docs/layer.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

struct Mxfp4ExpertWeights {
  int experts = 0, model_dim = 0, inter_dim = 0;
  // W1 [experts][2 * inter_dim][model_dim]: rows 0..I-1 are gate, I..2I-1 up; K = model_dim.
  std::vector<std::uint8_t> w1_packed;  // [experts][2I][D/2], element 2j in the low nibble
  std::vector<std::uint8_t> w1_scales;  // [experts][2I][D/32], e8m0
  // W2 [experts][model_dim][inter_dim]; K = inter_dim.
  std::vector<std::uint8_t> w2_packed;  // [experts][D][I/2]
  std::vector<std::uint8_t> w2_scales;  // [experts][D][I/32]
  // Expert biases, fp32, added where the model adds them (gpt-oss): b1 to GEMM1's outputs before
  // the activation (gate rows then up rows, as W1), b2 to GEMM2's before the route weight. Empty
  // for none; a config whose model.expert_biases is true requires both.
  std::vector<float> b1;  // [experts][2I]
  std::vector<float> b2;  // [experts][D]

  // Allocates zeroed tensors of the right sizes.
  static Mxfp4ExpertWeights zeros(int experts, int model_dim, int inter_dim);
  bool has_biases() const { return !b1.empty() || !b2.empty(); }
  // Throws megamoe::Error naming the field, its value and what was expected (biases: both or
  // neither, of their sizes, finite).
  void check() const;
};

// The weights of `experts` (ids into w's experts), expert experts[i] in slot i: a rank's slice of
// a group's weights, or its slots' replicas where redundant slots repeat experts (EPLB). Throws
// megamoe::Error naming the first id outside [0, w.experts).
Mxfp4ExpertWeights gather_experts(const Mxfp4ExpertWeights& w, const std::vector<int>& experts);

// a's experts, then b's: a rank's routed experts and then the model's shared ones, as
// prepare_weights takes them where the config names shared experts. Throws megamoe::Error where
// the two differ in model_dim, inter_dim or having biases.
Mxfp4ExpertWeights append_experts(const Mxfp4ExpertWeights& a, const Mxfp4ExpertWeights& b);

// MXFP4 weights from a checkpoint that stores gate and up as two tensors (compressed-tensors'
// mxfp4-pack-quantized, as Kimi checkpoints ship them; docs/layer.md, "Checkpoint layouts"):
// gate_packed and up_packed [experts][inter_dim][model_dim/2], their scales
// [experts][inter_dim][model_dim/32], W2 as above; joined into W1's halves (gate rows first).
Mxfp4ExpertWeights join_gate_up(int experts, int model_dim, int inter_dim, const std::uint8_t* gate_packed,
                                const std::uint8_t* gate_scales, const std::uint8_t* up_packed,
                                const std::uint8_t* up_scales, const std::uint8_t* w2_packed,
                                const std::uint8_t* w2_scales);

// MXFP4 weights from gpt-oss's checkpoint layout (docs/layer.md, "Checkpoint layouts"):
// gate_up_packed [experts][2*inter_dim][model_dim/2] (gpt-oss's gate_up_proj_blocks
// [E][2I][D/32][16], the same bytes), gate_up_scales [experts][2*inter_dim][model_dim/32], gate and
// up interleaved by row (row 2i gate i, row 2i+1 up i), gate_up_bias [experts][2*inter_dim]
// interleaved alike; down_packed [experts][model_dim][inter_dim/2], down_scales
// [experts][model_dim][inter_dim/32], down_bias [experts][model_dim]. W1's rows come out as halves
// (gate rows first), b1 alike, b2 as given. The biases may both be null (no biases), not one.
Mxfp4ExpertWeights from_interleaved_gate_up(int experts, int model_dim, int inter_dim,
                                            const std::uint8_t* gate_up_packed, const std::uint8_t* gate_up_scales,
                                            const float* gate_up_bias, const std::uint8_t* down_packed,
                                            const std::uint8_t* down_scales, const float* down_bias);

// How a checkpoint stores W1 (docs/layer.md, "Checkpoint layouts"); the shapes cannot tell halves
// from gpt-oss's rows interleaved, so the caller names it.
//  - halves: W1 one tensor, each expert's gate rows then its up rows (this library's own).
//  - separate_gate_up: gate and up as two tensors (compressed-tensors' mxfp4-pack-quantized, as
//    Kimi checkpoints ship them).
//  - gpt_oss: gate_up_proj_blocks [E][2I][D/32][16] (the bytes of [E][2I][D/2]) and its scales,
//    gate and up interleaved by row (row 2i gate i, row 2i+1 up i), gate_up_proj_bias alike.
enum class CheckpointLayout { halves, separate_gate_up, gpt_oss };
std::string_view to_string(CheckpointLayout layout);  // "halves", "separate_gate_up", "gpt_oss"
// An Error naming the value and the names there are otherwise.
CheckpointLayout checkpoint_layout_from_name(std::string_view name);

// A checkpoint's expert tensors as stored: contiguous host arrays, MXFP4 values two per byte with
// element 2j in the low nibble, e8m0 scales one per 32 values along K.
struct CheckpointTensors {
  const std::uint8_t* w1 = nullptr;         // halves [E][2I][D/2]; separate_gate_up: gate [E][I][D/2]; gpt_oss as above
  const std::uint8_t* w1_scales = nullptr;  // W1's shape with D/32 for D/2
  const std::uint8_t* up = nullptr;         // separate_gate_up only: up [E][I][D/2]
  const std::uint8_t* up_scales = nullptr;  // separate_gate_up only: [E][I][D/32]
  const std::uint8_t* w2 = nullptr;         // [E][D][I/2] (gpt_oss: down_proj_blocks, the same bytes)
  const std::uint8_t* w2_scales = nullptr;  // [E][D][I/32]
  const float* b1 = nullptr;  // [E][2I], gate then up (gpt_oss: interleaved as W1); null for none
  const float* b2 = nullptr;  // [E][D]; both biases or neither
};

// The library's weights from a checkpoint in `layout`: W1 as halves, b1 alike. Throws
// megamoe::Error naming a pointer the layout needs that is null, one it does not take that is
// given, a bias without the other, a shape off the MXFP4 blocks, or a bias that is not finite.
Mxfp4ExpertWeights load_checkpoint(CheckpointLayout layout, int experts, int model_dim, int inter_dim,
                                   const CheckpointTensors& tensors);

// Quantizes fp32 / bf16 expert weights (same shapes as above, unpacked) to MXFP4.
Mxfp4ExpertWeights quantize_expert_weights(const float* w1, const float* w2, int experts, int model_dim,
                                           int inter_dim);
Mxfp4ExpertWeights quantize_expert_weights_bf16(const std::uint16_t* w1, const std::uint16_t* w2, int experts,
                                                int model_dim, int inter_dim);

// Expert weights on the device, in the layout the runtime's kernels read (docs/layer.md):
// v1 (checkpoint layout) for the portable path, v3 for the tensor-core and Hopper paths, and on
// the Hopper path, where a bucket up to max_tokens reads fp8_resident weights, their e4m3 copy too.
class PreparedWeights {
 public:
  KernelPath path = KernelPath::portable;
  int experts = 0, model_dim = 0, inter_dim = 0;  // the model's (the buffers hold the path's padded shape)
  DeviceBuffer w1_packed, w1_scales, w2_packed, w2_scales;                 // v1
  DeviceBuffer w1_units, w1_row_scale, w2_units, w2_row_scale;  // v3
  DeviceBuffer w1_resident, w2_resident;  // the fp8-resident copy (src/weights/fp8_resident_layout.hpp)
  DeviceBuffer b1, b2;                    // fp32 expert biases, or none (null)
  std::size_t flushed_blocks = 0;  // v3: MX blocks too far below their row's largest, zeroed (W1's and W2's)
  std::size_t flushed_w1 = 0, flushed_w2 = 0;  // the same, of each matrix
  std::size_t resident_bytes = 0;  // device memory the fp8-resident copy takes (0: none made)
  std::size_t bytes() const;       // device memory of every buffer above (Runtime::weights_bytes states it)
};

}  // namespace megamoe
