#include "reference/h_flips.hpp"

#include <algorithm>

#include "formats/formats.hpp"

namespace megamoe::reference {

float fp8_held(float v, int e) { return std::ldexp(formats::e4m3_to_float(formats::float_to_e4m3(std::ldexp(v, -e))), e); }

std::vector<HFlip> h_flips(const std::vector<float>& h, const std::vector<float>& g, int h_block, bool h_static,
                           int h_exponent) {
  std::vector<HFlip> out;
  const std::size_t n = h.size(), block = h_static ? n : std::size_t(h_block);
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t b1 = std::min(n, b0 + block);
    // The block's scale from the least and the greatest amax the kernels can see (one
    // exponent where static); the reference's lies between them.
    int e_lo = h_exponent, e_hi = h_exponent, e_ref = h_exponent;
    if (!h_static) {
      float amax = 0.f, amax_lo = 0.f, amax_hi = 0.f;
      for (std::size_t i = b0; i < b1; ++i) {
        if (!std::isfinite(h[i])) continue;
        const float a = std::fabs(h[i]), err = float(kernel_activation_error(g[i], h[i]));
        amax = std::max(amax, a), amax_lo = std::max(amax_lo, std::max(0.f, a - err)), amax_hi = std::max(amax_hi, a + err);
      }
      e_ref = formats::fp8_block_exponent(amax);
      e_lo = formats::fp8_block_exponent(amax_lo), e_hi = formats::fp8_block_exponent(amax_hi);
    }
    for (std::size_t i = b0; i < b1; ++i) {
      if (!std::isfinite(h[i])) continue;
      // Rounding is monotone in the value for one scale: the held value lies between the ends'.
      const float err = float(kernel_activation_error(g[i], h[i])), held = fp8_held(h[i], e_ref);
      float reach = 0.f;
      for (int e : {e_lo, e_hi})
        for (float v : {h[i] - err, h[i] + err}) reach = std::max(reach, std::fabs(fp8_held(v, e) - held));
      if (reach > 0.f) out.push_back({int(i), reach});
    }
  }
  return out;
}

}  // namespace megamoe::reference
