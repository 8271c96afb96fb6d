// Constants and sizes that the host and the kernels must agree on, defined once: block sizes
// the host launches with, the error words, the weight layout's units, the epilogue regions and
// the shared-memory layout of the Hopper kernels. Plain C++ (the host compiler includes it too,
// through interface/kernel_args.cuh); functions here are constexpr on both sides.
#pragma once
#include "interface/scalar_types.cuh"

#if defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__) || defined(__CUDACC__) || defined(__HIPCC__)
#define MM_SHARED_FN __host__ __device__ constexpr
#else
#define MM_SHARED_FN constexpr
#endif

namespace megamoe {

// The error words the kernels count into and Runtime::take_errors() reads and clears: bad ids,
// the first bad slot (kNoBadSlot when none), bounds violations (the checked build); with several
// ranks also the first timed-out wait (its phase, kEpPhase*, and the rank it waited for) and the
// routed rows dropped past the workspace's capacity.
enum : int {
  kErrBadIds = 0,
  kErrFirstBadSlot = 1,
  kErrBoundsViolations = 2,
  kErrTimeoutPhase = 4,
  kErrTimeoutPeer = 5,
  kErrDroppedRows = 6,
  kErrWords = 8
};
enum : int { kNoBadSlot = 0x7fffffff };
// shared_routes' mark for a caller's bad id: outside every kernel's range, so route counts it.
enum : int { kBadRouteId = -2 };

// --- expert parallelism (docs/ep.md) ---
// kMaxGlobalExperts: the experts of a group, over every rank (the routing's per-expert counts in
// shared memory).
enum : int { kMaxWorld = 32, kMaxGlobalExperts = 8192 };
// route_ep's per-thread counts per destination: 16 words up to 16 ranks (the common worlds keep
// the smaller kernel), kMaxWorld past them.
MM_SHARED_FN int route_ep_ranks(int world) { return world <= 16 ? 16 : kMaxWorld; }
// The waits that can time out: a peer's counts, a source's rows, this rank's own layout of a
// tile's rows, a peer's Stage2 outputs.
enum : int { kEpPhaseCounts = 1, kEpPhaseRows = 2, kEpPhaseLayout = 3, kEpPhaseOutputs = 4 };
// A rank's state words (EpArgs::state): the calls completed (the call sequence), the route
// kernel's grid barrier, the blocks of a kernel that have finished (the last one signals), and
// the abort flag a timeout raises.
enum : int {
  kStateCallSeq = 0,
  kStateBarrierCount = 1,
  kStateBarrierGeneration = 2,
  kStateDispatchDone = 3,
  kStateStage2Done = 4,
  kStateCombineDone = 5,
  kStateAbort = 6,
  kStateReduceDone = 7,  // the nvshmem transport's node_reduce_ep: its blocks done
  kStateGateways = 8,    // the nvshmem transport: the rows this rank forwarded this call as a gateway
  kStateWords = 9
};
// A slot in a receive buffer's metadata: (local expert << kSlotRankBits) | its rank among the
// source's rows to that expert, or kNoSlot for a slot that goes elsewhere.
enum : int { kSlotRankBits = 21 };
enum : unsigned { kNoSlot = 0xffffffffu };
// Bytes of one received token's metadata: its token index (16 bytes with padding), then per slot
// the packed slot and its route weight.
MM_SHARED_FN int ep_meta_bytes(int topk) { return 16 + 8 * ((topk + 1) / 2 * 2); }
// The nvshmem transport, a token's row as it crosses to another node (docs/ep.md, "Node-aware
// dispatch and combine"): the metadata above for every slot served on that node (its token index
// at 0 and the call sequence at 4), then per slot the rank within the node that serves it (a byte,
// kNoNodeRank for none), then per rank of the node the token's row there (-1 none).
MM_SHARED_FN int ep_relay_ranks_at(int topk) { return ep_meta_bytes(topk); }
MM_SHARED_FN int ep_relay_rows_at(int topk) { return ep_meta_bytes(topk) + (topk + 3) / 4 * 4; }
MM_SHARED_FN int ep_relay_bytes(int topk, int node_size) {
  return (ep_relay_rows_at(topk) + 4 * node_size + 15) / 16 * 16;
}
enum : int { kNoNodeRank = 0xff };
// node_reduce_ep: warps a launch (each stages one summed row before its put).
enum : int { kNodeReduceThreads = 256, kNodeReduceMaxWarps = 1024 };

// Routing: one thread per expert in the scans; one block per kRouteSlotsPerBlock slots, at most
// kRouteMaxBlocks (more than one: route_count first).
enum : int { kRouteThreads = 1024, kMaxExperts = 1024, kRouteSlotsPerBlock = 2048, kRouteMaxBlocks = 256 };

// Block sizes of the element-wise kernels; dispatch_rows takes kDispatchChunks chunks of 128
// values per warp.
enum : int { kSharedRoutesThreads = 256 };
enum : int { kQuantizeThreads = 256, kDispatchThreads = 256, kDispatchChunks = 4, kCombineThreads = 256 };

// The activations' scale forms (docs/layer.md, "Scale modes"), as the Hopper kernels' template
// arguments take them. kXPerRow as kXBlock: one scale per token row of x (dispatch takes the
// row's maximum first). A main loop's kScaleChunks: chunks of 128 k per activation scale block,
// or kScaleWholeK (one scale per row, in the last chunk's entries: the whole K summed in the
// accumulators, scaled once) or kScaleStatic (no scales in the stages: the caller applies one
// constant in its stash).
enum : int { kXPerRow = 0, kScaleWholeK = 0, kScaleStatic = -1 };
MM_SHARED_FN int hopper_x_scale_chunks(int x_block) { return x_block == kXPerRow ? int(kScaleWholeK) : x_block / 128; }

// dispatch_rows' tasks, a warp each: a token's kDispatchChunks chunks at a time; with one x scale
// per row (kXPerRow) from kDispatchRowTokens tokens on a whole token (its row read once for its
// maximum), below that a group of chunks too (each warp taking the row's maximum itself, so that a
// call of few tokens is spread over several warps).
enum : int { kDispatchRowTokens = 1024 };
MM_SHARED_FN bool dispatch_whole_rows(bool x_per_row, int tokens) { return x_per_row && tokens >= kDispatchRowTokens; }
MM_SHARED_FN long long dispatch_rows_tasks(bool x_per_row, int tokens, int model_dim) {
  const long long groups = (model_dim / 128 + kDispatchChunks - 1) / kDispatchChunks;
  return dispatch_whole_rows(x_per_row, tokens) ? (long long)tokens : (long long)tokens * groups;
}

// Combine wire codes (the kWire template argument).
enum : int { kWireBf16 = 0, kWireFp8x32 = 1 };

// Weight layout v3 (src/weights/tensor_core_layout.hpp): a block's unit of one 128-k chunk holds
// 8 slabs of 16 rows, their words (1 KB a slab) then their exponents (64 B a slab).
enum : int { kSlabRows = 16, kSlabGroup = 8, kSlabWordBytes = 1024, kSlabExpBytes = 64 };
enum : int { kLayoutV3UnitBytes = kSlabGroup * (kSlabWordBytes + kSlabExpBytes) };
// Weight rows a tensor-core or Hopper block computes (one group of 8 slabs).
enum : int { kWeightRowsPerBlock = kSlabGroup * kSlabRows };
// Bytes of one expert's matrix of rows x k values in layout v3: the words (4 bits a value) and
// the exponents (a byte per 32).
MM_SHARED_FN i64 layout_v3_expert_bytes(i64 rows, int k) { return rows * k / 2 + rows * (k / 32); }
// The fp8-resident copy (src/weights/fp8_resident_layout.hpp): a block's unit of one 128-k chunk is
// its 128 rows of e4m3 in the 128-byte swizzle; an expert's matrix, rows x k bytes (rows a
// multiple of 128 here: the Hopper kernels' weight tiles).
enum : int { kFp8ResidentUnitBytes = kWeightRowsPerBlock * 128 };
MM_SHARED_FN i64 fp8_resident_expert_bytes(i64 rows, int k) { return rows * k; }

// The portable kernels' tile along the weights (columns of the output).
enum : int { kPortableThreads = 256, kPortableBw = 64 };

// The tensor-core kernels: 8 warps; the activations of a stage in rows of 144 bytes (128 k and
// 16 against bank conflicts); shared memory holds kStages stages, then the tile's activation
// scales as floats [BM][K / 64], or the epilogue tile [BM][epilogue_cols + 1] floats.
enum : int { kTensorCoreThreads = 256, kTensorCoreRowBytes = 144, kTensorCoreScaleBlock = 64 };
MM_SHARED_FN int tensor_core_stage_bytes(int bn) { return bn * kTensorCoreRowBytes + kLayoutV3UnitBytes; }
MM_SHARED_FN int tensor_core_smem_bytes(int bn, int stages, int k, int epilogue_cols) {
  const int pipeline = stages * tensor_core_stage_bytes(bn) + bn * (k / kTensorCoreScaleBlock) * 4;
  const int epilogue = bn * (epilogue_cols + 1) * 4;
  return pipeline > epilogue ? pipeline : epilogue;
}

// The Hopper kernels (moe/hopper_pipeline.cuh): a producer warpgroup and two consumer warpgroups
// per group of 128 weight rows (kGroups groups, 1 or 2: the block's weight tile is 128 or 256 rows,
// 64 rows a consumer warpgroup); shared memory from a 1024-aligned base: the barriers (512 bytes)
// and kHopperTileInfos TileInfo<BM> entries, then the stages, each 1024-aligned, of [activations
// BM x 128 B][a unit per group: layout v3's, or the fp8-resident copy's with `resident`]
// [activation scales BM x 16 B], then the epilogue region [BM][ld] floats, ld
// hopper_region_ld: Stage1 h's 64 columns a group and 4 of padding, Stage2 128 output columns a
// group and 4 (the padding keeps the consumers' writes and the storers' 16-byte reads free of bank
// conflicts).
enum : int { kHopperTileInfos = 4, kHopperBarrierBytes = 512 };
// The widest token tile the registers allow: with 128 weight rows, 176 where a stage promotes (two
// sets of fragments beside the sums and a set of partial sums in 232 registers) and 256 (wgmma's
// widest N) where it sums with no promotion; with 256 weight rows, 96 (the sums and two sets of
// fragments in 112). hopper_max_bm also asks for kHopperMinStages stages in shared memory.
enum : int { kHopperMaxBmPromoted = 176, kHopperMaxBm = 256, kHopperMaxBmWide = 96, kHopperMinStages = 3 };
MM_SHARED_FN int hopper_threads(int groups) { return 128 + 256 * groups; }
MM_SHARED_FN int hopper_region_ld(int stage, int groups) { return (stage == 1 ? 64 : 128) * groups + 4; }
MM_SHARED_FN int round_up_1024(int bytes) { return (bytes + 1023) / 1024 * 1024; }
MM_SHARED_FN int hopper_tile_info_bytes(int bn) { return 4 * 4 + bn * 8; }  // expert, col_tile, rows, p0; out, weight
MM_SHARED_FN int hopper_head_bytes(int bn) {
  return round_up_1024(kHopperBarrierBytes + kHopperTileInfos * hopper_tile_info_bytes(bn));
}
MM_SHARED_FN int hopper_stage_bytes(int bn, bool resident = false, int groups = 1) {
  return round_up_1024(bn * 128 + groups * (resident ? int(kFp8ResidentUnitBytes) : int(kLayoutV3UnitBytes)) + bn * 16);
}
MM_SHARED_FN int hopper_pipeline_bytes(int bn, int stages, bool resident = false, int groups = 1) {
  return hopper_head_bytes(bn) + stages * hopper_stage_bytes(bn, resident, groups);
}
// The dynamic shared memory a Hopper kernel is launched with: 1023 bytes of alignment slack, the
// pipeline and the region.
MM_SHARED_FN int hopper_dynamic_smem_bytes(int bn, int stages, int region_ld, bool resident = false, int groups = 1) {
  return 1024 + hopper_pipeline_bytes(bn, stages, resident, groups) + bn * region_ld * 4;
}
// Stage1's static shared memory (moe/stage1_hopper.cuh's Stage1PairShared): its rows' maxima, its
// own and its cluster peer's two, and two barriers.
MM_SHARED_FN int hopper_pair_shared_bytes(int bn) { return 3 * bn * 4 + 2 * 8; }
// A Hopper kernel's static shared memory, counted with the 1 KB that the cubins list in every sm_90
// kernel using shared memory: Stage1's Stage1PairShared; over several ranks a few protocol words.
MM_SHARED_FN int hopper_static_smem_bytes(int bn, int stage, bool ep) {
  return 1024 + (stage == 1 ? hopper_pair_shared_bytes(bn) : 0) + (ep ? 64 : 0);
}
enum : int { kHopperSharedLimit = 232448 };  // the dynamic and static shared memory an sm_90 block may have
// Pipeline stages that fit in `limit` bytes beside the static shared memory, the head and the region.
MM_SHARED_FN int hopper_stages_that_fit(int bn, int stage, bool ep, bool resident, int groups, int limit) {
  const int room = limit - hopper_static_smem_bytes(bn, stage, ep) -
                   hopper_dynamic_smem_bytes(bn, 0, hopper_region_ld(stage, groups), resident, groups);
  return room / hopper_stage_bytes(bn, resident, groups);
}
// The widest token tile of a Hopper stage: what its registers allow (a multiple of 16), narrowed
// until kHopperMinStages stages fit beside its region in one block an SM (over several ranks too, so
// that a config's tiles are the same at every world size). Stage2's region of 132 floats a token
// stops it at 192 from MXFP4 weights.
MM_SHARED_FN int hopper_max_bm(int stage, bool promotes, bool resident, int groups) {
  int bn = groups == 2 ? int(kHopperMaxBmWide) : promotes ? int(kHopperMaxBmPromoted) : int(kHopperMaxBm);
  while (bn > 16 && hopper_stages_that_fit(bn, stage, true, resident, groups, kHopperSharedLimit) < kHopperMinStages)
    bn -= 16;
  return bn;
}

}  // namespace megamoe
