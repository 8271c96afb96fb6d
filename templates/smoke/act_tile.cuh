// A tile-wise activation kernel: out[r, c] = act(in[r, c], in[r, cols + c]) over a
// [rows, 2*cols] fp32 input. It exercises the whole generator (a config's activation and
// tile sizes, the bounds-check build) end to end until the MoE stages replace it.
#pragma once
#include "common/activation.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

enum : int { kActTileThreads = 256 };

// Error codes written to *error by the checked build (0 means none).
enum : int { kActTileErrRowsOverCapacity = 1 };

template <class Act, int BM, int BN, bool kBoundsCheck>
MM_DEVICE void act_tile(const float* in, float* out, int rows, int cols, int row_capacity,
                        int* error) {
  if (kBoundsCheck && (rows > row_capacity || rows < 0 || cols < 0)) {
    if (blockIdx.x == 0 && threadIdx.x == 0) mm_atomic_max_device(error, kActTileErrRowsOverCapacity);
    return;
  }
  const int tiles_m = (rows + BM - 1) / BM, tiles_n = (cols + BN - 1) / BN;
  for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
    const int r0 = (tile / tiles_n) * BM, c0 = (tile % tiles_n) * BN;
    for (int i = threadIdx.x; i < BM * BN; i += kActTileThreads) {
      const int r = r0 + i / BN, c = c0 + i % BN;
      if (r < rows && c < cols) {
        const float* row = in + (i64)r * 2 * cols;
        out[(i64)r * cols + c] = Act::apply(row[c], row[cols + c]);
      }
    }
  }
}

}  // namespace megamoe
