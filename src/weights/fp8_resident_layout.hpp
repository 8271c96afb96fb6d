// The fp8-resident weight layout (docs/hopper-plan.md, "fp8-resident weights"): the e4m3
// values the Hopper kernels' in-register conversion makes of layout v3, stored once, for kernels
// that take both wgmma operands from shared memory. Per expert, rows in groups of 128 (a block's
// weight tile; layout v3's row order, so W1's gate and up rows interleave by slab as v3's do; a
// short last group padded with zero rows), each group's 128-k chunks one after the other, a chunk
// 128 rows of 128 bytes in the 128-byte swizzle (byte b of row r at r * 128 + ((b / 16) ^ (r % 8))
// * 16 + b % 16): one bulk copy per chunk. The row scales are v3's (2^r, in the epilogue).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "weights/tensor_core_layout.hpp"

namespace megamoe {

inline constexpr int kFp8ResidentRows = 128;  // rows of a group: a block's weight tile

// Bytes of one expert's matrix of `rows` x `k` values in the layout.
std::size_t fp8_resident_expert_bytes(int rows, int k);
// Where value (row r, k index kk) of an expert's matrix lies within its bytes.
std::size_t fp8_resident_at(int r, int kk, int k);

// The layout of `experts` matrices of rows x k from their layout v3 (to_tensor_core_layout).
std::vector<std::uint8_t> to_fp8_resident_layout(const TensorCoreWeights& v3, int experts, int rows, int k);

}  // namespace megamoe
