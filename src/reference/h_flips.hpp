// Where the emulating reference cannot say how the kernels round h. The kernels' activations are
// within kernel_activation_error of the fp32 reference's (their GPU test holds them to it); an h
// value that close to an fp8 rounding boundary, or a block whose largest value is that close to
// a change of the block's scale, may be held one step away from the reference's. For each such
// value this gives the most the held value can differ; the layer reference carries it through
// W2 to each output (LayerOutputs::flip_reach) and the checks allow exactly that much.
#pragma once
#include <cmath>
#include <vector>

namespace megamoe::reference {

// The most the kernels' act(g, u) differs from the reference's value h: 2e-6 (1 + |g| / 8)
// relative (the special function unit's 2^x and 1/x, and e^-g's argument rounded), or 1e-30
// absolute (subnormal results flush to zero). tests/templates/common/test_activation_gpu.cpp.
inline double kernel_activation_error(float g, float h) {
  const double gs = std::isfinite(g) ? std::fabs(g) / 8 : 0;
  return 2e-6 * (1 + gs) * std::fabs(double(h)) + 1e-30;
}

struct HFlip {
  int index;    // into the pair's h
  float reach;  // the most its held value can differ from the reference's held value
};

// One pair's h (the emulated one, before its fp8 rounding) and the gate values g it came from:
// the values whose held fp8 value the activations' error can move, in blocks of h_block with
// their own scale, or with the one scale 2^h_exponent where h_static. NaN and infinite values
// are left out (they fail the checks on their own).
std::vector<HFlip> h_flips(const std::vector<float>& h, const std::vector<float>& g, int h_block, bool h_static,
                           int h_exponent);

// v through e4m3 with the scale 2^e: the held value
float fp8_held(float v, int e);

}  // namespace megamoe::reference
