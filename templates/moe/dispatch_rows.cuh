// Dispatch on one GPU for the Hopper kernels: each token's row of x (bf16) is read once,
// quantized to fp8 in blocks of 128, and written routed (moe/routed_rows.cuh) to every routed row
// of its slots (route's slot_row; -1 for an empty or bad slot). One warp per token and four
// 128-value chunks, spread grid-wide. The checked build refuses, and counts, rows outside the
// workspace.
#pragma once
#include "moe/route.cuh"
#include "moe/routed_rows.cuh"

namespace megamoe {

enum : int { kDispatchThreads = 256, kDispatchChunks = 4 };

template <bool kCheck>
MM_DEVICE void dispatch_rows(const u16* x, const int* ids, const int* slot_row, const int* expert_offsets, int tokens,
                             int topk, int experts, int model_dim, int rows_pad, int rows_capacity, u8* xr, float* xs,
                             int* errors) {
  __shared__ int starts[kMaxExperts];
  mm_wait_prior_grid();  // Device::launch's early_start
  mm_release_dependents();
  for (int e = threadIdx.x; e < experts; e += kDispatchThreads) starts[e] = expert_offsets[e];
  __syncthreads();
  const int chunks = model_dim / 128, groups = (chunks + kDispatchChunks - 1) / kDispatchChunks;
  const int lane = threadIdx.x & 31, warps = kDispatchThreads / 32;
  const i64 tasks = (i64)tokens * groups;
  for (i64 task = (i64)blockIdx.x * warps + threadIdx.x / 32; task < tasks; task += (i64)gridDim.x * warps) {
    const int t = int(task / groups), c0 = int(task % groups) * kDispatchChunks;
    const u16* src = x + (i64)t * model_dim + lane * 4;
    uint2 raw[kDispatchChunks];
    for (int i = 0; i < kDispatchChunks; ++i)  // every load in flight before the first use
      raw[i] = c0 + i < chunks ? *reinterpret_cast<const uint2*>(src + (c0 + i) * 128) : make_uint2(0, 0);
    RoutedQuad q[kDispatchChunks];
    for (int i = 0; i < kDispatchChunks; ++i) {
      const float v[4] = {mm_bf16_to_f32(u16(raw[i].x)), mm_bf16_to_f32(u16(raw[i].x >> 16)),
                          mm_bf16_to_f32(u16(raw[i].y)), mm_bf16_to_f32(u16(raw[i].y >> 16))};
      q[i] = quantize_chunk(v);
    }
    for (int k0 = 0; k0 < topk; k0 += 32) {
      // Lane j looks up slot k0 + j: its routed row and where that row sits in its expert's tiles.
      int row = -1, swz = 0;
      if (k0 + lane < topk) {
        const int slot = t * topk + k0 + lane;
        row = slot_row[slot];
        if (kCheck && row >= rows_capacity) {
          atomicAdd(&errors[kErrBoundsViolations], 1);
          row = -1;
        }
        if (row >= 0) swz = (row - starts[ids[slot]]) & 7;
      }
      const int n = topk - k0 < 32 ? topk - k0 : 32;
      for (int j = 0; j < n; ++j) {
        const int p = __shfl_sync(0xffffffffu, row, j), s = __shfl_sync(0xffffffffu, swz, j);
        if (p < 0) continue;
        for (int i = 0; i < kDispatchChunks && c0 + i < chunks; ++i) store_routed_chunk(q[i], lane, c0 + i, p, s, rows_pad, xr, xs);
      }
    }
  }
}

}  // namespace megamoe
