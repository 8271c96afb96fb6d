// The persistent walk of the stage kernels over the tiles route laid out: which expert a row
// tile belongs to, the span of routed rows a tile covers, and each tile row's source and
// destination (with the checked build's bounds checks).
#pragma once
#include "interface/kernel_args.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// Which expert owns global row tile `tile`: the last e with tile_offsets[e] <= tile.
MM_DEVICE int expert_of_tile(const int* tile_offsets, int experts, int tile) {
  int lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Tile `tile` of a persistent walk over (row tile, column tile) pairs: its expert, the span
// [p0, p_end) of routed rows it may cover (p0 .. p0 + bm - 1, those below p_end), its column tile.
struct RoutedTile {
  int expert, p0, p_end, col_tile;
};

MM_DEVICE RoutedTile routed_tile(int tile, int col_tiles, int bm, const int* tile_offsets, const int* expert_offsets,
                                 int experts) {
  const int row_tile = tile / col_tiles;
  RoutedTile r;
  r.col_tile = tile % col_tiles;
  r.expert = expert_of_tile(tile_offsets, experts, row_tile);
  r.p0 = expert_offsets[r.expert] + (row_tile - tile_offsets[r.expert]) * bm;
  r.p_end = expert_offsets[r.expert + 1];
  return r;
}

// Stage1's tile rows: each row's token (a_rows) and output row (out_rows), -1 where none. The
// checked build refuses, and counts, rows whose indices would leave their buffers.
// Thread tid of kThreads; errors may be null (a second role computing the same rows), and a_rows
// too (the Hopper kernels, whose activations come routed).
template <int BM, int kThreads, bool kCheck>
MM_DEVICE void stage1_tile_rows(const RoutedTile& rt, const RoutedRows& rows, int tokens, int* errors, int* a_rows,
                                int* out_rows, int tid) {
  for (int n = tid; n < BM; n += kThreads) {
    const int p = rt.p0 + n;
    int token = p < rt.p_end ? rows.row_token[p] : -1;
    if (kCheck && p < rt.p_end && (p >= rows.rows_capacity || token < 0 || token >= tokens)) {
      if (errors) atomicAdd(&errors[kErrBoundsViolations], 1);
      token = -1;
    }
    if (a_rows) a_rows[n] = token;
    out_rows[n] = token >= 0 ? p : -1;
  }
}

// Stage2's tile rows: each row's routed row (a_rows, or null), slot on the wire and route weight.
template <int BM, int kThreads, bool kCheck>
MM_DEVICE void stage2_tile_rows(const RoutedTile& rt, const RoutedRows& rows, int slots, int* errors, int* a_rows,
                                int* out_slot, float* weight, int tid) {
  for (int n = tid; n < BM; n += kThreads) {
    const int p = rt.p0 + n;
    int slot = p < rt.p_end ? rows.row_slot[p] : -1;
    if (kCheck && p < rt.p_end && (p >= rows.rows_capacity || slot < 0 || slot >= slots)) {
      if (errors) atomicAdd(&errors[kErrBoundsViolations], 1);
      slot = -1;
    }
    if (a_rows) a_rows[n] = slot >= 0 ? p : -1;
    out_slot[n] = slot;
    weight[n] = slot >= 0 ? rows.row_weight[p] : 0.f;
  }
}

}  // namespace megamoe
