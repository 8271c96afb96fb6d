// Dispatch on one GPU for the Hopper kernels: each token's row of x (bf16) is read once,
// quantized to fp8 in blocks of kXBlock (128, 256 or 512), and written routed
// (moe/routed_rows.cuh) to every routed row of its slots (route's slot_row; -1 for an empty or bad
// slot); each 128-value chunk's scale entry holds its block's scale. One warp per token and four
// 128-value chunks, spread grid-wide: 8 lanes a chunk, each lane 16 values, so that every load
// and store is 16 bytes wide, and a block's chunks are in one warp. With kXBlock kXPerRow (one
// scale per row) each warp takes the row's maximum first; from kDispatchRowTokens tokens a warp
// takes a whole token, its chunks four at a time (dispatch_rows_tasks). The checked build
// refuses, and counts, rows outside the workspace. x's rows are x_dim wide; the routed rows'
// columns past it (the path's padding, whole 16-value pieces: x_dim is a multiple of 64) are zero.
#pragma once
#include "interface/kernel_args.cuh"
#include "moe/routed_rows.cuh"

namespace megamoe {

// A warp's four chunks (chunk: this lane's) of token t, quantized (q), onto each of the token's
// routed rows.
template <bool kCheck>
MM_DEVICE void dispatch_piece(const DispatchRowsArgs& a, int t, int chunk, bool live, const RoutedPiece& q, int lane) {
  const int topk = a.topk, piece = lane & 7;
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

template <int kXBlock, bool kCheck>
MM_DEVICE void dispatch_rows(const DispatchRowsArgs& a) {
  const int tokens = a.tokens, model_dim = a.model_dim;
  const int chunks = model_dim / 128, groups = (chunks + kDispatchChunks - 1) / kDispatchChunks;
  const int lane = threadIdx.x & 31, warps = kDispatchThreads / 32, piece = lane & 7;
  constexpr bool kPerRow = kXBlock == kXPerRow;
  const i64 tasks = dispatch_rows_tasks(kPerRow, tokens, model_dim);
  const bool whole_rows = dispatch_whole_rows(kPerRow, tokens);  // a warp per token
  bool waited = false;
  // x is the caller's: it is read and quantized while route (launched before, Device::launch's
  // early_start) may still run; its rows are needed from the first store on.
  auto wait_route = [&] {
    if (!waited) {
      mm_wait_prior_grid();
      mm_release_dependents();
      waited = true;
    }
  };
  for (i64 task = (i64)blockIdx.x * warps + threadIdx.x / 32; task < tasks; task += (i64)gridDim.x * warps) {
    const int t = int(whole_rows ? task : task / groups);
    const u16* x = a.x + (i64)t * a.x_dim;
    if constexpr (kPerRow) {
      const int e = mm_fp8_block_exponent(row_absmax_bf16(x, a.x_dim));
      wait_route();
      const int g0 = whole_rows ? 0 : int(task % groups), g1 = whole_rows ? groups : g0 + 1;
      for (int g = g0; g < g1; ++g) {
        const int chunk = g * kDispatchChunks + lane / 8;
        const bool live = chunk < chunks;  // the last group may hold fewer than four chunks
        float v[16] = {};
        if (live && chunk * 128 + piece * 16 < a.x_dim) load_bf16x16(x + chunk * 128 + piece * 16, v);
        dispatch_piece<kCheck>(a, t, chunk, live, quantize_piece_with(v, e), lane);
      }
    } else {
      const int chunk = int(task % groups) * kDispatchChunks + lane / 8;
      const bool live = chunk < chunks;
      float v[16] = {};
      if (live && chunk * 128 + piece * 16 < a.x_dim) load_bf16x16(x + chunk * 128 + piece * 16, v);
      const RoutedPiece q = quantize_piece<kXBlock / 16>(v);
      wait_route();
      dispatch_piece<kCheck>(a, t, chunk, live, q, lane);
    }
  }
}

}  // namespace megamoe
