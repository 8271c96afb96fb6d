// Host-side number formats: OCP MX e2m1 (MXFP4 elements) and e8m0 (MX scales), fp8 e4m3
// (OCP E4M3FN: max 448, no infinity), bf16, and megamoe's 1x32 block quantizers. The kernels
// have their own implementation (templates/common/numerics.cuh); both follow docs/formats.md.
#pragma once
#include <cstddef>
#include <cstdint>

namespace megamoe::formats {

inline constexpr int kBlock = 32;        // values per scale, for MXFP4 and for fp8 blocks
inline constexpr float kE4m3Max = 448.f;
inline constexpr float kE2m1Max = 6.f;

// e2m1: code bits s.ee.m; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
float e2m1_to_float(std::uint8_t code);
// Round to nearest, ties to even code, saturating at +-6. NaN gives 0 (MX marks NaN in the scale).
std::uint8_t float_to_e2m1(float v);

// e8m0: 2^(e - 127); 0xFF is NaN.
float e8m0_to_float(std::uint8_t e);

// e4m3 (E4M3FN): bias 7, subnormals, 0x7F/0xFF NaN. Encoding rounds to nearest even and
// saturates finite overflow (and infinities) to +-448; NaN gives 0x7F.
float e4m3_to_float(std::uint8_t b);
std::uint8_t float_to_e4m3(float v);

float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float v);  // round to nearest even; NaN stays NaN

// The power-of-two scale exponent of an fp8 block: the least e with amax / 2^e <= 448
// (0 for an all-zero block), clamped to [-127, 127]. Stored as an e8m0 byte (e + 127).
int fp8_block_exponent(float amax);

// MXFP4 block scale exponent (OCP MX): floor(log2(amax)) - 2, clamped to [-127, 127];
// -127 for an all-zero block.
int mxfp4_block_exponent(float amax);

// Quantize / dequantize n values in blocks of 32 (MXFP4), or of `block` (fp8; n a multiple of it).
//   fp8: q[n] e4m3 bytes, scales[n/block] e8m0 bytes.
//   mxfp4: packed[n/2] (element 2j in the low nibble, 2j+1 in the high one), scales[n/32].
void quantize_fp8_blocks(const float* v, std::size_t n, std::uint8_t* q, std::uint8_t* scales, int block = kBlock);
void dequantize_fp8_blocks(const std::uint8_t* q, const std::uint8_t* scales, std::size_t n, float* out,
                           int block = kBlock);
void quantize_mxfp4(const float* v, std::size_t n, std::uint8_t* packed, std::uint8_t* scales);
void dequantize_mxfp4(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float* out);

}  // namespace megamoe::formats
