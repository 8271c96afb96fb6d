// Weight layout v2, read by the tensor-core kernels (templates/moe/mma_gemm.cuh). For one
// weight matrix per expert of `rows` x `k` MXFP4 values (k a multiple of 128, rows of 16):
//  - rows in slabs of 16, one warp's mma M; with interleave_gate_up (W1), slab j holds gate rows
//    8j..8j+7 then up rows 8j..8j+7, so one thread ends up with the gate and up of one column;
//  - pieces: the (slab, 128-k chunk) pieces of an expert are ordered by group of 8 slabs (128
//    rows, one block of the kernels), then chunk, then slab in the group (tensor_core_piece), so
//    that what a block reads for one chunk is contiguous: 8 KB of words and 512 B of exponents;
//  - words[e][piece][lane][half][kblock]: a u32 holding the 8 e2m1 values that lane
//    (g = lane / 4, t = lane % 4) feeds to the mma for row g + 8 * half of the slab and the
//    32-value k block: k = 4t..4t+3 and 16+4t..16+4t+3. Magnitudes (3 bits) in nibbles 0-3 and
//    4-7, the signs of the first four at bits 7, 15, 23, 31 and of the last four at bits 3, 11,
//    19, 27: two byte permutes and two masks make e4m3 of them;
//  - exps[e][piece][row][kblock]: f = s - r, the block's e8m0 exponent s less the row's
//    r = (largest s in the row) - 6, folded into the e4m3 values (f in [-5, 6]); a block with a
//    smaller exponent is flushed to zero (counted in flushed_blocks);
//  - row_scale[e][row]: 2^r, applied to the accumulators in the epilogue.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace megamoe {

struct TensorCoreWeights {
  std::vector<std::uint8_t> words;
  std::vector<std::int8_t> exps;
  std::vector<float> row_scale;
  std::size_t flushed_blocks = 0;
};

TensorCoreWeights to_tensor_core_layout(const std::uint8_t* packed, const std::uint8_t* scales, int experts,
                                        int rows, int k, bool interleave_gate_up);

inline constexpr int kSlabGroup = 8;
// The index of slab `slab`'s piece of chunk `chunk` among an expert's slabs x chunks pieces.
std::size_t tensor_core_piece(int slab, int chunk, int slabs, int chunks);

// The source row (in checkpoint order) of row `r` of the layout.
int tensor_core_source_row(int r, int rows, bool interleave_gate_up);

// The 8 values of a layout word with folded exponent f, in k order (4t..4t+3, 16+4t..16+4t+3),
// computed with the same byte permutes the kernels use.
void decode_tensor_core_word(std::uint32_t word, int f, float out[8]);

}  // namespace megamoe
