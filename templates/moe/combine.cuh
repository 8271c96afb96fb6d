// Combine on one GPU: y[t] = sum over k, in k order and in fp32, of the route-weighted Stage2
// rows on the wire (slot t * topk + k), for the slots whose id is in [0, experts); y in bf16.
// Over nodes a node's slots come summed (one bf16 row, added at the node's first slot).
// One thread per (token, 8 columns), grid-stride: 16-byte loads (8 bytes and a scale byte on the
// fp8 wire), kCombineBatch slots loaded before the first is added so their loads overlap.
// Needs model_dim % 8 == 0 and y 16-byte aligned (the runtime checks both). The wire's rows are
// model_dim wide (the path's shape), y's y_dim (the model's: the columns past it are padding).
#pragma once
#include "common/numerics.cuh"
#include "interface/kernel_args.cuh"

namespace megamoe {

enum : int { kCombineBatch = 4 };

// Adds 8 wire values of one slot to acc; on the fp8 wire each value times its block scale is one
// fused multiply-add (a separate product can overflow where the fused one does not).
template <int kWire>
MM_DEVICE void combine_add8(uint4 raw, u8 scale, float* acc) {
  if (kWire == 0) {
    const u32 w[4] = {raw.x, raw.y, raw.z, raw.w};
    for (int i = 0; i < 4; ++i) {
      acc[2 * i] += mm_bf16_to_f32(u16(w[i]));
      acc[2 * i + 1] += mm_bf16_to_f32(u16(w[i] >> 16));
    }
  } else {
    const float s = mm_e8m0_to_f32(scale);
    const u32 w[2] = {raw.x, raw.y};
    for (int i = 0; i < 8; ++i) acc[i] = fmaf(mm_e4m3_to_f32(u8(w[i / 4] >> (8 * (i % 4)))), s, acc[i]);
  }
}

// Over nodes (kPartials, CombineArgs::partials set): whether slot k of token t is served on
// another node (node_of), and whether it is that node's first slot of t (its sum is added there).
MM_DEVICE bool combine_first_of_node(const CombineArgs& a, int t, int k, int node) {
  for (int i = 0; i < k; ++i) {
    const int id = a.ids[t * a.topk + i];
    if (id >= 0 && id < a.experts && id / a.node_experts == node) return false;
  }
  return true;
}

template <int kWire, bool kPartials = false>
MM_DEVICE void combine(const CombineArgs& a) {
  const int* ids = a.ids;
  const int topk = a.topk, experts = a.experts, model_dim = a.model_dim;
  mm_wait_prior_grid();  // Device::launch's early_start
  mm_release_dependents();
  const int groups = a.y_dim / 8;
  const i64 tasks = (i64)a.tokens * groups;
  for (i64 task = (i64)blockIdx.x * kCombineThreads + threadIdx.x; task < tasks;
       task += (i64)gridDim.x * kCombineThreads) {
    const int t = int(task / groups), c = int(task % groups) * 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < topk; k0 += kCombineBatch) {
      uint4 raw[kCombineBatch];
      u8 scale[kCombineBatch];
      bool live[kCombineBatch], summed[kCombineBatch];  // summed: the row is its node's sum, in bf16
      for (int j = 0; j < kCombineBatch; ++j) {  // every load of the batch in flight first
        const int k = k0 + j, id = k < topk ? ids[t * topk + k] : -1;
        live[j] = id >= 0 && id < experts;
        summed[j] = kPartials && live[j] && a.partials && id / a.node_experts != a.home_node;
        raw[j] = make_uint4(0, 0, 0, 0);
        scale[j] = 0;
        if (!live[j]) continue;
        const i64 at = (i64)(t * topk + k) * model_dim + c;
        if (summed[j]) {
          const int node = id / a.node_experts;
          live[j] = combine_first_of_node(a, t, k, node);
          if (live[j])
            raw[j] = *reinterpret_cast<const uint4*>(a.partials + ((i64)node * a.max_tokens + t) * model_dim + c);
          continue;
        }
        if (kWire == 0) {
          raw[j] = *reinterpret_cast<const uint4*>(static_cast<const u16*>(a.wire) + at);
        } else {
          const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const u8*>(a.wire) + at);
          raw[j] = make_uint4(v.x, v.y, 0, 0);
          scale[j] = a.wire_scales[at / 32];
        }
      }
      for (int j = 0; j < kCombineBatch; ++j) {
        if (!live[j]) continue;
        if (summed[j]) combine_add8<kWireBf16>(raw[j], 0, acc);
        else combine_add8<kWire>(raw[j], scale[j], acc);
      }
    }
    u32 out[4];
    for (int i = 0; i < 4; ++i) out[i] = u32(mm_f32_to_bf16(acc[2 * i])) | u32(mm_f32_to_bf16(acc[2 * i + 1])) << 16;
    *reinterpret_cast<uint4*>(a.y + (i64)t * a.y_dim + c) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

}  // namespace megamoe
