// Combine on one GPU: y[t] = sum over k, in k order and in fp32, of the route-weighted Stage2
// rows on the wire (slot t * topk + k), for the slots whose id is in [0, experts); y in bf16.
#pragma once
#include "common/numerics.cuh"

namespace megamoe {

enum : int { kCombineThreads = 256 };

template <int kWire>
MM_DEVICE void combine(const int* ids, int tokens, int topk, int experts, int model_dim, const void* wire,
                       const u8* wire_scales, u16* y) {
  for (int t = blockIdx.x; t < tokens; t += gridDim.x)
    for (int c = threadIdx.x; c < model_dim; c += kCombineThreads) {
      float acc = 0.f;
      for (int k = 0; k < topk; ++k) {
        const int id = ids[t * topk + k];
        if (id < 0 || id >= experts) continue;
        const i64 at = (i64)(t * topk + k) * model_dim + c;
        if (kWire == 0)
          acc += mm_bf16_to_f32(static_cast<const u16*>(wire)[at]);
        else
          acc += mm_e4m3_to_f32(static_cast<const u8*>(wire)[at]) * mm_e8m0_to_f32(wire_scales[at / 32]);
      }
      y[(i64)t * model_dim + c] = mm_f32_to_bf16(acc);
    }
}

}  // namespace megamoe
