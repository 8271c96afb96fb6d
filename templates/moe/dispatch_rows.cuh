// Dispatch on one GPU for the Hopper kernels: each routed row's token row of x (bf16) quantized
// to fp8 in blocks of 64 and written routed (moe/routed_rows.cuh). One warp per (row, 128-value
// chunk), spread grid-wide. The checked build refuses, and counts, rows whose token is out of range.
#pragma once
#include "moe/route.cuh"
#include "moe/routed_rows.cuh"

namespace megamoe {

enum : int { kDispatchThreads = 256 };

template <bool kCheck>
MM_DEVICE void dispatch_rows(const u16* x, const int* row_token, const int* expert_offsets, int experts, int tokens,
                             int model_dim, int rows_pad, u8* xr, float* xs, int* errors) {
  __shared__ int starts[kMaxExperts + 1];
  for (int e = threadIdx.x; e <= experts; e += kDispatchThreads) starts[e] = expert_offsets[e];
  __syncthreads();
  const int chunks = model_dim / 128, lane = threadIdx.x & 31;
  const i64 tasks = (i64)starts[experts] * chunks;
  const int warps = kDispatchThreads / 32;
  for (i64 task = (i64)blockIdx.x * warps + threadIdx.x / 32; task < tasks; task += (i64)gridDim.x * warps) {
    const int p = int(task / chunks), chunk = int(task % chunks);
    int token = row_token[p];
    if (kCheck && (token < 0 || token >= tokens)) {
      if (lane == 0 && chunk == 0) atomicAdd(&errors[kErrBoundsViolations], 1);
      token = -1;
    }
    int lo = 0, hi = experts - 1;  // p's expert: the last e with starts[e] <= p
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (starts[mid] <= p) lo = mid;
      else hi = mid - 1;
    }
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (token >= 0) {
      const uint2 raw = *reinterpret_cast<const uint2*>(x + (i64)token * model_dim + chunk * 128 + lane * 4);
      v[0] = mm_bf16_to_f32(u16(raw.x)), v[1] = mm_bf16_to_f32(u16(raw.x >> 16));
      v[2] = mm_bf16_to_f32(u16(raw.y)), v[3] = mm_bf16_to_f32(u16(raw.y >> 16));
    }
    store_routed_chunk(v, lane, chunk, p, (p - starts[lo]) & 7, rows_pad, xr, xs);
  }
}

}  // namespace megamoe
