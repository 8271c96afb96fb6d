// One call of a rank of an expert-parallel group (docs/ep.md): route_ep, then either Stage1 with
// the dispatch inside it, or (serial) dispatch_ep and the single-GPU Stage1, then Stage2 onto
// the home ranks' wires, then combine_ep.
#pragma once
#include <algorithm>

#include "ep/ep_workspace.hpp"
#include "megamoe/runtime.hpp"
#include "runtime/bucket_kernels.hpp"
#include "runtime/stream_launch.hpp"
#include "runtime/workspace.hpp"

namespace megamoe {

struct EpCall : StreamLaunch {
  const ModelShape& model;  // the path's shape: the model's dims padded to its multiple
  int x_dim;                // x's and y's rows: the model's model_dim
  const BucketConfig& bucket;
  const EpBucketKernels& kernels;
  Workspace& ws;
  const EpWorkspace& ep_ws;
  EpArgs ep;  // the group's and this rank's plan
  const PreparedWeights& weights;
  const void* x;
  const int* ids;
  const float* route_weights;
  void* y;
  int tokens;
  bool serial;
  bool early;       // launches may start early (not on loopback ranks: docs/ep.md)
  unsigned share;   // loopback: the most blocks a launch of this rank may have (0: no such bound)

  // waits: the kernel waits for the one before it (mm_wait_prior_grid) before it touches memory,
  // so it may start early.
  template <class Args>
  void launch(const Kernel<Args>& kernel, unsigned grid, const Args& args, bool waits = true) const {
    StreamLaunch::launch(kernel, grid, args, early && waits);
  }
  // A grid of at most `blocks`, within the loopback share, in whole clusters.
  unsigned grid(long long blocks, int cluster = 1) const {
    long long g = std::max<long long>(blocks, 1);
    if (share) g = std::min<long long>(g, share);
    return unsigned(std::max<long long>(g / cluster * cluster, cluster));
  }
  // A persistent stage grid: the row tiles of the most rows this rank may receive (every rank's
  // tokens, or the capacity) at blocks_per_sm blocks per SM.
  unsigned tile_grid(int bm, int col_tiles, int blocks_per_sm, int cluster = 1) const {
    const long long rows = std::min<long long>((long long)ep.world * std::max(tokens, 1) * model.topk, ws.rows_capacity);
    const long long row_tiles = (rows + bm - 1) / bm + model.experts_per_rank;
    return grid(std::min<long long>(row_tiles * col_tiles, (long long)blocks_per_sm * device.multiprocessors()), cluster);
  }
};

void launch_ep_call(const EpCall& call);

}  // namespace megamoe
