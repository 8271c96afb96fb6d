// Dispatch on one GPU for the Hopper kernels: each token's row of x (bf16) is read once,
// quantized to fp8 in blocks of kXBlock (128, 256 or 512), and written routed
// (moe/routed_rows.cuh) to every routed row of its slots (route's slot_row; -1 for an empty or bad
// slot); each 128-value chunk's scale entry holds its block's scale. One warp per token and four
// 128-value chunks, spread grid-wide: 8 lanes a chunk, each lane 16 values, so that every load
// and store is 16 bytes wide, and a block's chunks are in one warp. The checked build refuses,
// and counts, rows outside the workspace.
#pragma once
#include "interface/kernel_args.cuh"
#include "moe/routed_rows.cuh"

namespace megamoe {

template <int kXBlock, bool kCheck>
MM_DEVICE void dispatch_rows(const DispatchRowsArgs& a) {
  const int tokens = a.tokens, topk = a.topk, model_dim = a.model_dim;
  const int chunks = model_dim / 128, groups = (chunks + kDispatchChunks - 1) / kDispatchChunks;
  const int lane = threadIdx.x & 31, warps = kDispatchThreads / 32, piece = lane & 7;
  const i64 tasks = (i64)tokens * groups;
  bool waited = false;
  for (i64 task = (i64)blockIdx.x * warps + threadIdx.x / 32; task < tasks; task += (i64)gridDim.x * warps) {
    const int t = int(task / groups), chunk = int(task % groups) * kDispatchChunks + lane / 8;
    const bool live = chunk < chunks;  // the last group may hold fewer than four chunks
    uint4 raw[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    if (live) {
      const uint4* src = reinterpret_cast<const uint4*>(a.x + (i64)t * model_dim + chunk * 128 + piece * 16);
      raw[0] = src[0], raw[1] = src[1];
    }
    float v[16];
    const u32 w[8] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w, raw[1].x, raw[1].y, raw[1].z, raw[1].w};
    for (int i = 0; i < 8; ++i) v[2 * i] = mm_bf16_to_f32(u16(w[i])), v[2 * i + 1] = mm_bf16_to_f32(u16(w[i] >> 16));
    const RoutedPiece q = quantize_piece<kXBlock / 16>(v);
    // x is the caller's: it was read and quantized while route (launched before, Device::launch's
    // early_start) may still run; its rows are needed from here on.
    if (!waited) {
      mm_wait_prior_grid();
      mm_release_dependents();
      waited = true;
    }
    for (int k0 = 0; k0 < topk; k0 += 32) {
      // Lane j looks up slot k0 + j: its routed row and where that row sits in its expert's tiles.
      int row = -1, r16 = 0;
      if (k0 + lane < topk) {
        const int slot = t * topk + k0 + lane;
        row = a.slot_row[slot];
        if (kCheck && row >= a.rows_capacity) {
          atomicAdd(&a.errors.words[kErrBoundsViolations], 1);
          row = -1;
        }
        if (row >= 0) r16 = (row - a.expert_offsets[a.ids[slot]]) & 15;
      }
      const int n = topk - k0 < 32 ? topk - k0 : 32;
      for (int j = 0; j < n; ++j) {
        const int p = __shfl_sync(0xffffffffu, row, j), s = __shfl_sync(0xffffffffu, r16, j);
        if (p >= 0 && live) store_routed_piece(q, piece, chunk, p, s, a.rows_pad, a.xr, a.xs);
      }
    }
  }
}

}  // namespace megamoe
