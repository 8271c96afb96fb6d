// The run-time entry point: created from a config name, it picks the bucket for a call's token
// count, gets that bucket's kernels from the cache (compiling on a miss), loads and launches them.
// One Runtime is one rank: of a group of one (every expert local) or of an expert-parallel group
// of several (ep.hpp, docs/ep.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/ep.hpp"
#include "megamoe/weights.hpp"

namespace megamoe {

struct Workspace;        // src/runtime/workspace.hpp
struct BucketKernels;    // src/runtime/bucket_kernels.hpp
struct EpBucketKernels;  // src/runtime/bucket_kernels.hpp
struct EpWorkspace;      // src/ep/ep_workspace.hpp
struct Group;            // src/ep/group.hpp

struct RuntimeOptions {
  BackendKind backend = BackendKind::cuda;
  int device = 0;
  int max_tokens = 8192;  // the most tokens one call may pass (sizes the workspace)
  bool profile = false;   // record events between the stages (see last_stage_times)
  KernelPath path = KernelPath::automatic;  // the expert-GEMM kernels (config.hpp)

  // Several ranks (docs/ep.md). Every rank of a group passes the same config and options but
  // rank (and, for peer, its device from devices).
  int world = 1;  // ranks in the group, 1 to 32 (kMaxWorld)
  int rank = 0;   // this process's rank (ipc, nvshmem); Runtime::create_ranks numbers its ranks itself
  Transport transport = Transport::loopback;
  std::vector<int> devices;  // peer: each rank's GPU (default 0 .. world - 1)
  AllGather all_gather;      // ipc, nvshmem: the group's all-gather (default: folder_all_gather of MEGAMOE_BOOTSTRAP_DIR)
  // nvshmem: the ranks of a node, consecutive (rank r in node r / node_size); a token's row goes
  // to another node once, by NVSHMEM's puts, and is forwarded and its outputs summed there by
  // load and store (docs/ep.md). 0: the whole group is one node. Every rank of a node must be
  // mapped by NVSHMEM (nvshmem_ptr; refused at creation otherwise). Ranks sharing a GPU can be
  // told apart as nodes (node_size 1 or 2) to run the puts where load and store would reach.
  int node_size = 0;
  int timeout_ms = 5000;     // the bound of every cross-rank wait (MEGAMOE_TIMEOUT_MS overrides it)
  bool serial = false;       // dispatch, the expert GEMMs and combine as launches with full barriers between
  // Routed rows a rank can hold (its workspace): 0 for the worst case, world x max_tokens x topk
  // (every slot of every rank routed to this rank's experts). Rows past it are dropped, counted
  // (CallErrors::dropped_rows), and their tokens' outputs lack them.
  long long routed_rows_capacity = 0;
  // Buckets whose config reads fp8_resident weights (Hopper path): false runs them on the mxfp4
  // kernels instead, and prepare_weights makes no e4m3 copy (it takes twice the MXFP4 weights'
  // bytes: 3.7 GB a rank for Kimi-K3). config() then says mxfp4 for every bucket.
  bool fp8_resident_weights = true;
  // Expert slots beyond the model's experts, for load balancing (EPLB; docs/ep.md, "Redundant
  // experts"): the group holds model.experts + redundant_experts slots, world dividing them, and
  // every call's ids name slots. The caller puts a logical expert's weights in each of its slots
  // (gather_experts) and maps each route to one of its replicas; config().model.logical_experts
  // keeps the model's count.
  int redundant_experts = 0;
  // The config's bucket table (docs/configs.md, "A table per card"): empty for the one tuned on
  // this GPU (its name as the driver gives it), else the config's default; or a card's name, or
  // "default", for that table on any GPU. Runtime::table_choice() says which it took and why.
  std::string bucket_table;
};

// Device memory a rank takes beside its weights (docs/layer.md, "Workspace"), allocated at
// creation and not after. Over several ranks most of it is the symmetric region, sized by world x
// max_tokens; the routed rows a rank holds (routed_rows_capacity) size the layer's x and h.
struct WorkspaceBytes {
  std::size_t layer = 0;             // routing, x and h in fp8 with their scales, the combine wire
  std::size_t symmetric_region = 0;  // several ranks: what peers write (counts, flags, received rows, wire)
  std::size_t group_plan = 0;        // several ranks: this rank's plan of a call
  long long routed_rows = 0;         // rows a rank holds: routed_rows_capacity, or the worst case
  std::size_t total() const { return layer + symmetric_region + group_plan; }
};

struct StageTimes {
  float route_ms = 0, quantize_ms = 0, stage1_ms = 0, stage2_ms = 0, combine_ms = 0, total_ms = 0;
};

// What the kernels found wrong in the calls since the last take_errors().
struct CallErrors {
  long long bad_ids = 0;            // ids outside [-1, model.experts): skipped, never sent
  long long first_bad_slot = -1;    // t * topk + k of the first of them, in the call that had it
  long long bounds_violations = 0;  // only counted by the checked build (bounds_check)
  long long dropped_rows = 0;       // several ranks: routed rows past routed_rows_capacity, dropped
  bool any() const { return bad_ids || bounds_violations || dropped_rows; }
};

// One Runtime serves every MoE layer of a model on its rank: it holds the kernels, the workspace
// and the group, and each layer holds only its weights (a PreparedWeights from prepare_weights).
// Layer l's call is forward(*weights[l], ...): calls of every layer go through the same
// workspace, ordered on one stream (or streams the caller orders), as a model's layers run one
// after another; a graph may capture the calls of several layers. Over several ranks every rank
// makes the same calls in the same order (each forward() of any layer is one call of the group).
class Runtime {
 public:
  // Throws ConfigError for a bad config, NoGpuError where there is no GPU. With options.world > 1
  // (transport ipc) this is one rank of a group of processes, and every rank must call it: it
  // maps the peers' memory, loads the kernels of every bucket up to max_tokens (compiling what
  // the cache lacks, with a line of progress each), and returns once every rank has.
  static std::unique_ptr<Runtime> create(std::string_view config_name, RuntimeOptions options = {});
  // The same from a config already loaded (load_config, with_buckets_of, with_experts). The
  // runtime holds it resolved for options.world (config_for_world): each rank holds
  // model.experts / world experts, and a world that does not divide them is an Error.
  static std::unique_ptr<Runtime> create(Config config, RuntimeOptions options = {});
  // Every rank of a group in this process (transport loopback or peer), each with its own
  // workspace; with the kernels of every bucket up to max_tokens loaded.
  static std::vector<std::unique_ptr<Runtime>> create_ranks(std::string_view config_name, RuntimeOptions options);
  static std::vector<std::unique_ptr<Runtime>> create_ranks(Config config, RuntimeOptions options);
  ~Runtime();

  // The workspace a Runtime created with `config` and `options` takes, before it is created (no
  // GPU needed). It depends on the path: options.path named, or for automatic the path `arch`'s
  // GPU runs (resolved as creation resolves it: "sm_90a", "sm_89", ...; a named path is checked
  // against arch, by default the backend's target, sm_90a or gfx90a). Throws megamoe::Error for
  // options that creation would refuse, and for automatic without an arch. `config` as given to
  // create (the options' world and redundant_experts are applied here). With no GPU to name the
  // card, the bucket table is options.bucket_table's, else the default: name the card's table
  // for its bytes (the fp8-resident copy is there where a bucket of that table reads it).
  static WorkspaceBytes workspace_bytes(Config config, const RuntimeOptions& options, std::string_view arch = {});
  // This runtime's, as allocated (equal to the static function's for its resolved path).
  WorkspaceBytes workspace_bytes() const;
  // Device bytes one layer's weights take on this rank (prepare_weights: the path's layout and,
  // where a bucket up to max_tokens reads it, the fp8-resident copy), before creation, with
  // workspace_bytes' arguments: a model of L MoE layers through one runtime takes
  // workspace_bytes(...).total() + L x weights_bytes(...) on each rank.
  static std::size_t weights_bytes(Config config, const RuntimeOptions& options, std::string_view arch = {});

  const Config& config() const { return config_; }
  const RuntimeOptions& options() const { return options_; }
  KernelPath path() const { return path_; }  // resolved: portable, tensor_core or hopper
  // The path and, where automatic runs a slower one than this GPU's fastest, why (config.hpp).
  const PathChoice& path_choice() const { return path_choice_; }
  // The bucket table it runs and why (config.hpp; config().table names its card).
  const TableChoice& table_choice() const { return table_choice_; }
  int rank() const { return options_.rank; }
  int world() const { return options_.world; }
  // How a call of `tokens` tokens rounds and sums on this runtime's path: its bucket's, at the
  // path's shape (for the references).
  PathArithmetic arithmetic(std::int64_t tokens) const;
  Device& device() { return *device_; }

  // Checks the weights' shape against the config and uploads them in the kernels' layout (padded
  // with zeros where the path runs the model's dims padded: path_choice().note says so). A rank's
  // experts_per_rank routed experts, then, where the model has them, its shared_experts
  // (append_experts).
  std::unique_ptr<PreparedWeights> prepare_weights(const Mxfp4ExpertWeights& weights);

  // Experts for replace_experts: any number of experts of the model's shape, in this runtime's
  // layout (its path, and the fp8-resident copy where its weights have one). Allocates.
  std::unique_ptr<PreparedWeights> prepare_replacement(const Mxfp4ExpertWeights& experts);

  // Replaces the weights of this rank's slots (local ids 0 .. experts_per_rank - 1, the group's
  // slot rank x experts_per_rank + s; then its shared experts, experts_per_rank + j) with
  // replacement's experts, expert i into slots[i], on
  // `stream`, in place: device copies only (no allocation, no compile, no host sync), ordered
  // against the calls before and after it on that stream; graphs captured before keep reading
  // `weights` (now the new ones), and the replacement can itself be captured. Keep replacement
  // alive until the stream has passed the copies. weights.flushed_blocks keeps its count.
  // Throws megamoe::Error for a slot out of range or named twice, a count other than
  // replacement's experts, or weights of another path, shape or layout.
  void replace_experts(PreparedWeights& weights, const std::vector<int>& slots, const PreparedWeights& replacement,
                       StreamHandle stream = nullptr);

  // Builds and loads the kernels of the bucket of `tokens` now rather than at the first call.
  void prepare(std::int64_t tokens);

  // y[t] = sum_k weights[t,k] * FFN_{ids[t,k]}(x[t]) for t < tokens (and, with shared experts,
  // + model.shared_expert_scale x sum_j FFN_shared_j(x[t])), on `stream`. Device pointers:
  // x and y bf16 [tokens][model_dim], 16-byte aligned; ids int32 and weights fp32 [tokens][topk].
  // An id of -1 is an empty slot; other ids outside [0, model.experts) are skipped and
  // reported by take_errors(). With several ranks ids are global, every rank calls forward() for
  // each call (tokens may differ between ranks, and may be 0), and a call's kernels wait for the
  // other ranks' (each wait bounded by timeout_ms).
  // Throws megamoe::Error for tokens outside [0, max_tokens], x or y not 16-byte aligned, a null
  // pointer where tokens > 0, or weights of another shape.
  // Launches only: no host sync and no allocation once the bucket's kernels are loaded, so calls
  // can go back to back and be captured in a graph (call prepare() first; the GPU tests replay a
  // captured call on new inputs). The workspace is the runtime's own: one Runtime serves one
  // stream at a time.
  void forward(const PreparedWeights& weights, const void* x, const int* ids, const float* route_weights, void* y,
               std::int64_t tokens, StreamHandle stream = nullptr);

  // Turns the recording of stage events on or off for later calls (off while capturing a graph).
  void set_profile(bool on) { options_.profile = on; }

  // With options.profile: the stage times of the last forward() (waits for it).
  StageTimes last_stage_times();

  // Waits for the device, returns the errors gathered since the last call, and clears them.
  // Throws PeerTimeoutError when a wait for another rank timed out: then every rank of the group
  // calls recover() before its next call.
  CallErrors take_errors();

  // After a PeerTimeoutError: waits until no kernel of the group runs (each ends within its
  // bound), clears the group's flags and counters, and lets calls go on; the runtime need not be
  // recreated. In-process groups: one call recovers every rank. ipc: every rank calls it.
  void recover();

  // Several ranks: the serial path (RuntimeOptions::serial) for later calls; every rank of the
  // group must make the same choice for a call.
  void set_serial(bool serial) { options_.serial = serial; }

 private:
  Runtime(Config config, RuntimeOptions options, std::unique_ptr<Device> device);
  // create() of a rank of several (src/runtime/group_ranks.cpp, with create_ranks and connect_ipc_peers).
  static std::unique_ptr<Runtime> create_ipc_rank(Config config, RuntimeOptions options);
  const BucketKernels& kernels_for(std::int64_t tokens);
  const EpBucketKernels& ep_kernels_for(std::int64_t tokens);
  void load_every_bucket();
  void connect_ipc_peers();
  void forward_ep(const PreparedWeights& weights, const void* x, const int* ids, const float* route_weights, void* y,
                  int tokens, StreamHandle stream);

  Config config_;
  Config kernels_config_;  // config_ at the path's shape (padded_model): what the workspace and kernels take
  RuntimeOptions options_;
  std::unique_ptr<Device> device_;
  KernelPath path_ = KernelPath::portable;
  PathChoice path_choice_;
  TableChoice table_choice_;
  std::unique_ptr<Workspace> workspace_;
  std::map<int, std::unique_ptr<BucketKernels>> loaded_;  // by bucket
  // Several ranks:
  std::shared_ptr<Group> group_;
  std::unique_ptr<EpWorkspace> ep_;
  std::map<int, std::unique_ptr<EpBucketKernels>> ep_loaded_;  // by bucket
  bool needs_recover_ = false;
  EventHandle stage_events_[6] = {};  // the stage boundaries of the last call (StageTimes): 6 events
};

}  // namespace megamoe
