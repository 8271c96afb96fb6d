// Weight layout v3, read by the tensor-core kernels (templates/moe/tensor_core_gemm.cuh) and the Hopper
// kernels (templates/moe/hopper_mxfp4_loop.cuh). For one weight matrix per expert of `rows` x `k` MXFP4
// values (k a multiple of 128, rows of 16):
//  - rows in slabs of 16, one warp's mma M; with interleave_gate_up (W1), slab j holds gate rows
//    8j..8j+7 then up rows 8j..8j+7, so one thread ends up with the gate and up of one column;
//  - units: an expert's bytes are ordered by group of 8 slabs (128 rows, one block of the kernels),
//    then 128-k chunk; a unit (group, chunk) holds the group's words for the chunk (1 KB per
//    slab), then its exponents (64 B per slab): 8704 bytes for a full group, read by a block as
//    one copy per chunk;
//  - a slab's words in its unit: [lane][half][kblock], a u32 holding the 8 e2m1 values that lane
//    (g = lane / 4, t = lane % 4) feeds to the mma for row g + 8 * half of the slab and the
//    32-value k block: k = 4t..4t+3 and 16+4t..16+4t+3. Magnitudes (3 bits) in nibbles 0-3 and
//    4-7, the signs of the first four at bits 7, 15, 23, 31 and of the last four at bits 3, 11,
//    19, 27: two byte permutes and two masks make e4m3 of them;
//  - a slab's exponents in its unit: [row][kblock], f = s - r, the block's e8m0 exponent s less
//    the row's r = (largest s in the row) - 6, folded into the e4m3 values (f in [-5, 6]); a block
//    with a smaller exponent is flushed to zero (counted in flushed_blocks);
//  - row_scale[e][row]: 2^r, applied to the accumulators in the epilogue.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "interface/kernel_constants.cuh"

namespace megamoe {

struct TensorCoreWeights {
  std::vector<std::uint8_t> units;  // experts x tensor_core_expert_bytes(rows, k)
  std::vector<float> row_scale;
  std::size_t flushed_blocks = 0;
};

TensorCoreWeights to_tensor_core_layout(const std::uint8_t* packed, const std::uint8_t* scales, int experts,
                                        int rows, int k, bool interleave_gate_up);

// kSlabGroup, kSlabWordBytes, kSlabExpBytes: interface/kernel_constants.cuh (the kernels' own).
// Bytes of one expert's matrix: its words (4 bits a value) and exponents (one byte per 32).
std::size_t tensor_core_expert_bytes(int rows, int k);
// Where slab `slab`'s words and exponents of chunk `chunk` start within its expert's bytes.
std::size_t tensor_core_words_at(int slab, int chunk, int slabs, int chunks);
std::size_t tensor_core_exps_at(int slab, int chunk, int slabs, int chunks);

// The source row (in checkpoint order) of row `r` of the layout.
int tensor_core_source_row(int r, int rows, bool interleave_gate_up);

// The 8 e4m3 bytes a layout word with folded exponent f converts to, in k order (4t..4t+3,
// 16+4t..16+4t+3), made with the same byte permutes the kernels use; and their values.
void tensor_core_word_e4m3(std::uint32_t word, int f, std::uint8_t out[8]);
void decode_tensor_core_word(std::uint32_t word, int f, float out[8]);

}  // namespace megamoe
