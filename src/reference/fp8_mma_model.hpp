// The sums of sm_90's fp8 matrix instructions (wgmma with e4m3 operands and an f32
// accumulator), as the H200 computes them (docs/layer.md, accuracy): each step of 32 products
// aligns them and the running sum to the largest exponent among the products' exponent sums
// (ea + eb, the mantissas' product not counted) and the sum's exponent, truncates each toward
// zero to 13 bits below it, adds them exactly, and truncates the result to 13 mantissa bits.
// The Hopper path promotes such a sum into an fp32 sum once per scale block of K (a chunk).
#pragma once

namespace megamoe::reference {

inline constexpr int kMmaStepK = 32;          // products per step (one wgmma k-block of e4m3)
inline constexpr int kMmaMantissaBits = 13;   // bits the accumulator keeps below its leading one

// sum over i < len of a[i] * b[i], summed as one chunk of MMA steps from a zero accumulator.
// len is a multiple of kMmaStepK; a and b hold values of at most 12 significant bits together
// (e2m1 or e4m3 values times powers of two), so each product is exact in fp32.
float fp8_mma_chunk(const float* a, const float* b, int len);

}  // namespace megamoe::reference
