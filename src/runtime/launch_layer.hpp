// One call's launches on one GPU: the call (LayerCall: the stream, the inputs, the persistent
// grids' size) and its launchers, routing, quantization and combine in launch_layer.cpp and one
// per kernel path in launch_layer_<path>.cpp. Runtime::forward checks its arguments, then calls
// these in order.
#pragma once
#include <algorithm>

#include "megamoe/runtime.hpp"
#include "runtime/bucket_kernels.hpp"
#include "runtime/stream_launch.hpp"
#include "runtime/workspace.hpp"

namespace megamoe {

// What every launch of a call needs: the stream and its events (StreamLaunch), and the call's
// inputs.
struct LayerCall : StreamLaunch {
  const ModelShape& model;
  const BucketKernels& kernels;
  Workspace& ws;
  const PreparedWeights& weights;
  const void* x;
  const int* ids;
  const float* route_weights;
  void* y;
  int tokens;

  int slots() const { return tokens * model.topk; }

  // A persistent grid: at most blocks_per_sm blocks per SM walk the tiles routing laid out, in
  // whole clusters (the tile count is a multiple of the cluster: col_tiles is).
  unsigned tile_grid(int bm, int col_tiles, int blocks_per_sm, int cluster = 1) const {
    const long long row_tiles = (slots() + bm - 1) / bm + model.experts_per_rank;  // each expert adds at most one partial tile
    const long long g = std::min<long long>(row_tiles * col_tiles, (long long)blocks_per_sm * device.multiprocessors());
    return unsigned(std::max<long long>(g / cluster * cluster, cluster));
  }
};

// Every path: routing (route_count where it takes more than one block, then route), and combine.
void launch_route(const LayerCall& call);
void launch_combine(const LayerCall& call);

// x to fp8 by token (the portable and tensor-core paths).
void launch_quantize_rows(const LayerCall& call, const Kernel<QuantizeRowsArgs>& kernel);

// Each path's quantization and stages, between StageMark::routed and StageMark::stage2_done.
void launch_stages_portable(const LayerCall& call, const PortableLoaded& k);
void launch_stages_tensor_core(const LayerCall& call, const TensorCoreLoaded& k);
void launch_stages_hopper(const LayerCall& call, const HopperLoaded& k);

}  // namespace megamoe
