// One call's launches on one GPU: the call (LayerCall: the stream, the inputs, the persistent
// grids' size) and its launchers, routing, quantization and combine in launch_layer.cpp, and each
// path's quantization and stages (between StageMark::routed and StageMark::stage2_done) as its
// definition's launch (codegen/path_kernels.hpp) in launch_layer_<path>.cpp. Runtime::forward checks its arguments, then calls
// these in order.
#pragma once
#include <algorithm>

#include "megamoe/runtime.hpp"
#include "runtime/bucket_kernels.hpp"
#include "runtime/stage_args.hpp"
#include "runtime/stream_launch.hpp"
#include "runtime/workspace.hpp"

namespace megamoe {

// What every launch of a call needs: the stream and its events (StreamLaunch), and the call's
// inputs.
struct LayerCall : StreamLaunch {
  const ModelShape& model;  // the path's shape: the model's dims padded to its multiple
  int x_dim;                // x's and y's rows: the model's model_dim
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

// A model with shared experts (config/shared_slots.hpp): shared_routes widens the caller's ids and
// weights into the workspace, on one GPU and over several ranks alike. model: the kernels' (topk
// and experts_per_rank counting the shared slots); rank: the tokens' home. Returns the widened
// ids and weights, which the call's later kernels read.
struct CallRoutes {
  const int* ids;
  const float* weights;
};
CallRoutes launch_shared_routes(const StreamLaunch& s, const Kernel<SharedRoutesArgs>& kernel, unsigned max_grid,
                                bool early, const ModelShape& model, int world, int rank, Workspace& ws,
                                const int* ids, const float* weights, int tokens);

// Every path: routing (route_count where it takes more than one block, then route), and combine.
void launch_route(const LayerCall& call);
void launch_combine(const LayerCall& call);

// x to fp8 by token (the portable and tensor-core paths).
void launch_quantize_rows(const LayerCall& call, const Kernel<QuantizeRowsArgs>& kernel);

// Stage1's and Stage2's arguments of a call on one GPU: the parts every stage shares
// (stage_args.hpp), x from the workspace (its scales e8m0 bytes, or floats on the Hopper path:
// the structs say which), the call's tokens, and the wire by slot.
template <class Stage1, class Stage2>
void layer_stage_args(const LayerCall& c, WeightForm form, Stage1& s1, Stage2& s2) {
  fill_stage_parts(c.model, c.ws, c.weights, form, s1, s2);
  s1.x_q = static_cast<const u8*>(c.ws.x_q.get());
  s1.x_scales = static_cast<decltype(s1.x_scales)>(c.ws.x_scales.get());
  s1.tokens = c.tokens;
  s2.wire = c.ws.wire.get();
  s2.wire_scales = static_cast<u8*>(c.ws.wire_scales.get());
  s2.slots = c.slots();
}


}  // namespace megamoe
