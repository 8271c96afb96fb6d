// The arguments of every kernel family, one struct each. The host fills a struct by field name
// (src/runtime/launch_*.cpp), the rendered entry point takes it by value and hands it to its
// template (src/codegen/render.cpp), and the templates read it by field name: both compilers see
// this one definition. Plain types and pointers only (the host compiler includes it too); kName
// is what the rendered entry point calls the struct.
// Device pointers throughout; "routed rows" are the rows route lays out expert by expert
// (docs/layer.md), rows_capacity their count in the workspace.
#pragma once
#include "interface/kernel_constants.cuh"

namespace megamoe {

// What the kernels share, one struct per concern, each filled in one place
// (src/runtime/stage_args.cpp): a field added to one reaches every kernel that embeds it.

// The routed layout a stage walks (moe/routed_tiles.cuh), from route's (or route_ep's) outputs.
struct RoutedRows {
  const int* expert_offsets;  // [experts + 1]: an expert's first routed row
  const int* tile_offsets;    // [experts + 1]: an expert's first row tile of this stage's token tile
  const int* row_token;       // Stage1, per routed row: the row of x it reads (a token, or a receive row)
  const int* row_slot;        // Stage2, per routed row: its row on the combine wire
  const float* row_weight;    // Stage2, per routed row: its route weight
  int rows_pad;               // rows per chunk of the routed layout (the Hopper path's x and h)
  int rows_capacity;          // routed rows the workspace holds
};

// One GEMM's expert weights, as prepare_weights laid them out (docs/layer.md), and the experts'
// shape: the path's, the model's dims padded up to its multiple.
struct ExpertWeights {
  const u8* data;          // layout v1's nibbles, layout v3's units, or the fp8-resident copy
  const u8* block_scales;  // layout v1: e8m0 per 32 values (null for the others)
  const float* row_scale;  // layout v3 and the fp8-resident copy: 2^r per weight row (null for v1)
  const float* bias;       // [experts][outputs] fp32 by output in natural order (W1: gate then up), or null
  int experts, model_dim, inter_dim;
};

// The error words (kErrWords of them) a kernel counts bad input into (Runtime::take_errors).
struct ErrorWords {
  int* words;
};

// shared_routes (moe/shared_routes.cuh): a call's ids and weights widened by the model's shared
// experts, as the kernels after it take them (src/config/shared_slots.hpp).
struct SharedRoutesArgs {
  static constexpr const char* kName = "SharedRoutesArgs";
  const int* ids;        // [tokens][topk] the caller's ids: -1 empty, [0, experts) routed
  const float* weights;  // [tokens][topk] the caller's route weights
  int tokens, topk, experts;  // the caller's: topk routed slots a token, experts in the group
  int experts_per_rank, shared, rank;  // the caller's experts a rank; shared experts; the tokens' home
  float shared_weight;   // model.shared_expert_scale
  int* wide_ids;         // [tokens][topk + shared]: kernel slots; -1 empty; kBadRouteId for a bad id
  float* wide_weights;   // [tokens][topk + shared]
};

// route_count (moe/route.cuh): counts[block][expert], block b's rows routed to each expert.
struct RouteCountArgs {
  static constexpr const char* kName = "RouteCountArgs";
  const int* ids;  // [tokens][topk] expert ids; -1 an empty slot
  int tokens, topk, experts;
  int* counts;
  ErrorWords errors;
};

// route (moe/route.cuh): the routed layout of a call. counts: route_count's, or null where route
// runs on one block and counts for itself.
struct RouteArgs {
  static constexpr const char* kName = "RouteArgs";
  const int* ids;
  const float* weights;  // [tokens][topk] route weights
  int tokens, topk, experts;
  int bm1, bm2;  // Stage1's and Stage2's token tiles
  const int* counts;
  int* expert_offsets;  // [experts + 1]: an expert's first routed row
  int* tile_offsets1;   // [experts + 1]: an expert's first Stage1 row tile
  int* tile_offsets2;   // [experts + 1]: the same for Stage2
  int* row_token;       // per routed row: its token
  int* row_slot;        // per routed row: its slot t * topk + k
  float* row_weight;    // per routed row: its route weight
  int* slot_row;        // per slot: its routed row, -1 for none
  ErrorWords errors;
};

// quantize_rows (moe/quantize_rows.cuh): x to fp8 by token, e8m0 scales per block of values.
struct QuantizeRowsArgs {
  static constexpr const char* kName = "QuantizeRowsArgs";
  const u16* x;  // [rows][x_cols] bf16
  int rows, cols;
  int x_cols;  // the model's model_dim: q's columns past it (the path's padding) are zero
  u8* q;       // [rows][cols] e4m3
  u8* scales;  // [rows][cols / block] e8m0
};

// dispatch_rows (moe/dispatch_rows.cuh): x quantized once per token and written to each of its
// routed rows in the routed layout (moe/routed_rows.cuh).
struct DispatchRowsArgs {
  static constexpr const char* kName = "DispatchRowsArgs";
  const u16* x;
  const int* ids;
  const int* slot_row;
  const int* expert_offsets;
  int tokens, topk, experts, model_dim;
  int x_dim;     // x's row: the model's model_dim (the routed row's columns past it are zero)
  int rows_pad;  // rows per chunk of the routed layout
  int rows_capacity;
  u8* xr;     // routed x, e4m3
  float* xs;  // routed x's scales
  ErrorWords errors;
};

// Stage1 of the portable and tensor-core paths (moe/stage1_portable.cuh: W1 in layout v1, x and
// h in scale blocks of 32; moe/stage1_tensor_core.cuh: W1 in layout v3, blocks of 64):
// h = act(W1 x) by routed row, x by token.
struct Stage1Args {
  static constexpr const char* kName = "Stage1Args";
  const u8* x_q;       // by token, e4m3
  const u8* x_scales;  // by token, e8m0 per scale block
  RoutedRows rows;
  ExpertWeights w1;  // the path's layout
  u8* h_q;           // by routed row
  u8* h_scales;      // e8m0 per scale block
  int tokens;        // rows of x
  ErrorWords errors;
};

// Stage2 of the portable and tensor-core paths (moe/stage2_portable.cuh,
// moe/stage2_tensor_core.cuh): W2 h by routed row, times the route weight, onto the combine wire
// at the row's slot.
struct Stage2Args {
  static constexpr const char* kName = "Stage2Args";
  const u8* h_q;
  const u8* h_scales;
  RoutedRows rows;
  ExpertWeights w2;
  void* wire;       // [slots][model_dim]: bf16, or e4m3 with wire_scales
  u8* wire_scales;  // e8m0 per 32 values (the fp8 wire)
  int slots;
  ErrorWords errors;
};

// stage1_hopper (moe/stage1_hopper.cuh): x and h in the routed layout, their scales f32.
struct Stage1HopperArgs {
  static constexpr const char* kName = "Stage1HopperArgs";
  const u8* x_q;
  const float* x_scales;
  RoutedRows rows;
  ExpertWeights w1;  // layout v3, or the fp8-resident copy for the fp8-resident kernels
  u8* h_q;
  float* h_scales;
  int tokens;
  ErrorWords errors;
};

// stage2_hopper (moe/stage2_hopper.cuh).
struct Stage2HopperArgs {
  static constexpr const char* kName = "Stage2HopperArgs";
  const u8* h_q;
  const float* h_scales;
  RoutedRows rows;
  ExpertWeights w2;  // as Stage1HopperArgs::w1
  void* wire;
  u8* wire_scales;
  int slots;
  ErrorWords errors;
};

// combine (moe/combine.cuh): y[t] = the sum over k of the wire rows of t's slots.
struct CombineArgs {
  static constexpr const char* kName = "CombineArgs";
  const int* ids;
  int tokens, topk, experts, model_dim;  // model_dim: the wire's row (the path's padded one)
  int y_dim;                             // y's row: the model's model_dim
  const void* wire;
  const u8* wire_scales;
  u16* y;  // [tokens][y_dim] bf16
  // The nvshmem transport with ranks of other nodes: the slots served on another node come as one
  // row a node (bf16, their sum; ep/node_reduce_ep.cuh), added where that node's first slot is.
  const u16* partials;  // [nodes][max_tokens][model_dim], or null: every slot from the wire
  int node_experts;     // experts a node: node n serves ids [n node_experts, (n + 1) node_experts)
  int home_node, max_tokens;
};

// --- expert parallelism (templates/ep/, docs/ep.md) ---

// What every EP kernel knows of the group and of this rank's plan. The symmetric region is the
// same buffer at the same offsets on every rank; peers write into it.
struct EpArgs {
  u8* peers[kMaxWorld];  // every rank's symmetric region (this rank's own at [rank])
  int rank, world;
  int experts;     // per rank: rank r owns global experts [r * experts, (r + 1) * experts)
  int max_tokens;  // per rank and call: a source's rows in a receive buffer
  int topk, model_dim;
  int x_block;     // values per e8m0 scale of x on the dispatch wire
  u32* state;      // kStateWords words of this rank's state
  ErrorWords errors;
  u64 timeout_ns;  // every cross-rank wait's bound
  // The symmetric region, byte offsets:
  u64 counts_at;        // [2][world][experts + 1] ints: a source's rows per local expert, then its tokens here
  u64 count_flags_at;   // [2][world] u32: the call sequence those counts belong to
  u64 arrive_flags_at;  // [world] u32: a source's rows of this call all sent here
  u64 done_flags_at;    // [world] u32: a rank's Stage2 outputs of this call all sent here
  u64 recv_x_at;        // [world][max_tokens][model_dim] e4m3
  u64 recv_scales_at;   // [world][max_tokens][model_dim / x_block] e8m0
  u64 recv_meta_at;     // [world][max_tokens][ep_meta_bytes(topk)]
  u64 wire_at;          // [max_tokens * topk][model_dim]: bf16, or e4m3 in the first half
  u64 wire_scales_at;   // [max_tokens * topk][model_dim / 32] e8m0 (the fp8 wire)
  // The nvshmem transport (ep/shmem.cuh): ranks this one reaches by puts (peers[r] null: another
  // node), and the staging of what it puts there (symmetric region offsets).
  int remote;             // how many such ranks (0: every rank by load and store)
  u64 stage_counts_at;    // [world][experts + 1] ints: the counts for each such rank
  u64 stage_x_at;         // [max_tokens][model_dim] e4m3: each token's x, once
  u64 stage_scales_at;    // [max_tokens][model_dim / x_block] e8m0
  u64 stage_relay_at;     // [nodes][max_tokens][ep_relay_bytes]: each token's relay metadata for each node
  u64 outbox_at;          // [rows_capacity][model_dim] bf16 (or e4m3): Stage2's rows of such ranks' tokens
  u64 outbox_scales_at;   // [rows_capacity][model_dim / 32] e8m0
  u64 stage_partials_at;  // [kNodeReduceMaxWarps][model_dim] bf16: a node's summed row before its put
  // Node-aware dispatch and combine (docs/ep.md): ranks [node_first, node_first + node_size) share
  // this rank's node; a token's row for another node goes once to one rank there, its gateway,
  // which forwards it to the others and sums what the node's slots give it.
  int node_size, node_first;
  u64 fwd_flags_at;       // [world][world] u32: [source][gateway]: its rows of that source forwarded here
  u64 node_done_flags_at; // [world] u32: a rank of this node has all its Stage2 rows in its outbox
  u64 relay_meta_at;      // [world][max_tokens][ep_relay_bytes]: a source's row as its gateway receives it
  u64 slot_map_at;        // [world][max_tokens][topk] int2: a gateway row's slot: (rank, its outbox row)
  u64 partials_at;        // [nodes][max_tokens][model_dim] bf16: a node's sum of a token's slots
  int* gateway_rows;      // [world * max_tokens]: this call's gateway rows (source x max_tokens + row)
  int* forwarded;         // [world]: a source's rows this rank has scanned for forwarding this call
  // This rank's plan (local):
  int* dest_row;      // [max_tokens][world]: token t's row in rank d's receive buffer, -1 if none
  int* slot_rank;     // [max_tokens * topk]: a slot's rank among this rank's slots to its expert
  int* segment;       // [experts][world]: the first routed row of (local expert, source)
  int* segment_rows;  // [experts][world]: the rows of (local expert, source) laid out here
  int* ready;         // [experts][world]: the rows of (local expert, source) laid out so far
};

// route_ep (ep/route_ep.cuh): this rank's tokens routed over the group, the counts exchanged,
// and this rank's layout of the rows it will receive.
struct RouteEpArgs {
  static constexpr const char* kName = "RouteEpArgs";
  EpArgs ep;
  const int* ids;  // [tokens][topk] global expert ids; -1 an empty slot
  int tokens;
  int bm1, bm2;
  int* block_counts;  // [gridDim][world * experts + world]: a block's rows per global expert, then tokens per rank
  int* expert_offsets;
  int* tile_offsets1;
  int* tile_offsets2;
  int rows_capacity;  // routed rows this rank can hold; rows past it are dropped and counted
};

// The dispatch of a call: this rank's tokens sent once per destination rank, and the rows other
// ranks send here laid out for Stage1. Run by the first `blocks` blocks of Stage1, or by every
// block of dispatch_ep (the serial path).
struct EpDispatch {
  const u16* x;  // [tokens][x_dim] bf16
  int x_dim;     // the model's model_dim (EpArgs::model_dim is the path's padded one)
  const int* ids;
  const float* weights;
  int tokens;
  int blocks;      // blocks that dispatch
  int persistent;  // 1: they take no Stage1 tiles afterwards
  int stride;      // consecutive tokens a dispatch warp takes per step
  const int* expert_offsets;
  int* row_token;     // per routed row: its row in the receive buffers (source * max_tokens + row)
  int* row_slot;      // per routed row: its home's wire row (home * max_tokens * topk + slot)
  float* row_weight;  // per routed row: its route weight
  u8* xr;             // the routed layout of x (Hopper), or null where Stage1 reads the receive buffers
  float* xs;
  int rows_pad, rows_capacity;
};

// dispatch_ep (ep/dispatch_ep.cuh): the serial path's dispatch launch.
struct DispatchEpArgs {
  static constexpr const char* kName = "DispatchEpArgs";
  EpArgs ep;
  EpDispatch dispatch;
};

// The EP stage kernels: the single-GPU stage's arguments (over the rows this rank received), the
// group, and for Stage1 the dispatch its first blocks run.
struct Stage1EpArgs {  // the portable and tensor-core paths
  static constexpr const char* kName = "Stage1EpArgs";
  Stage1Args stage;
  EpArgs ep;
  EpDispatch dispatch;
};
struct Stage2EpArgs {
  static constexpr const char* kName = "Stage2EpArgs";
  Stage2Args stage;
  EpArgs ep;
};
struct Stage1HopperEpArgs {
  static constexpr const char* kName = "Stage1HopperEpArgs";
  Stage1HopperArgs stage;
  EpArgs ep;
  EpDispatch dispatch;
};
struct Stage2HopperEpArgs {
  static constexpr const char* kName = "Stage2HopperEpArgs";
  Stage2HopperArgs stage;
  EpArgs ep;
};

// combine_ep (ep/combine_ep.cuh): once every rank's Stage2 outputs are here, the single-GPU
// combine over this rank's tokens (ids global).
struct CombineEpArgs {
  static constexpr const char* kName = "CombineEpArgs";
  CombineArgs combine;
  EpArgs ep;
};

// node_reduce_ep (ep/node_reduce_ep.cuh; the nvshmem transport with ranks of other nodes): once
// every rank of this node has its Stage2 rows in its outbox, each gateway row's slots summed and
// put home as one row, then this rank's done flags.
struct NodeReduceEpArgs {
  static constexpr const char* kName = "NodeReduceEpArgs";
  EpArgs ep;
  int rows_capacity;  // every rank's outbox rows (the group's routed_rows_capacity)
};

// flag_pingpong (ep/flag_pingpong.cuh; megamoe-bench --world W): one thread on each of two GPUs (or
// two blocks of one) passing a flag back and forth `rounds` times, as the EP kernels' signals go:
// the leader writes round r into `theirs` (the other's memory), the other waits for it in `mine`
// and answers. status: 0, or 1 when a wait passed timeout_ns (nothing hangs).
struct FlagPingPongArgs {
  static constexpr const char* kName = "FlagPingPongArgs";
  u32* mine;
  u32* theirs;
  int rounds, leads;
  u64 timeout_ns;
  int* status;
};

}  // namespace megamoe
