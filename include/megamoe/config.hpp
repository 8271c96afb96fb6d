// Configs: one JSON file per model and quant (configs/*.json), checked against the schema
// in docs/configs.md, with one entry per batch-size bucket.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace megamoe {

enum class ActivationKind { silu, situv2, swiglu };
std::string_view to_string(ActivationKind kind);

// SwiGLU is one family: min(g, limit) x sigmoid(alpha x min(g, limit)) x (clamp(u, -limit, limit) +
// up_offset). alpha 1 and up_offset 0 make the clamped SwiGLU; gpt-oss takes limit 7, alpha 1.702
// and up_offset 1.
struct Activation {
  ActivationKind kind = ActivationKind::silu;
  float beta = 0.f;         // situv2
  float linear_beta = 0.f;  // situv2
  float limit = 0.f;        // swiglu
  float alpha = 1.f;        // swiglu
  float up_offset = 0.f;    // swiglu
};

// A bound on |act(gate, up)| for every gate and up, or infinity where there is none (SiLU):
// SiTUv2's two factors stay below beta and linear_beta; SwiGLU's gate factor below max(limit x
// sigmoid(alpha x limit), 0.2785 / alpha) (x sigmoid(alpha x) has its least value, -0.2785 / alpha,
// at x = -1.2785 / alpha, and rises from there) and its up factor below limit + |up_offset|. A static h scale (HScale::static_bound) takes its
// exponent from it.
float activation_bound(const Activation& a);

// experts is the model's; a rank of a `world`-rank group holds experts / world of them, rank r
// global experts [r x experts_per_rank, (r + 1) x experts_per_rank). config_for_world sets
// experts_per_rank (a parsed config is world 1's: experts_per_rank = experts).
struct ModelShape {
  int experts = 0;           // global: the expert slots every call's ids name
  int experts_per_rank = 0;  // experts / world
  // The model's own experts: experts, or fewer where redundant slots replicate some of them
  // (with_redundant_experts, RuntimeOptions::redundant_experts; docs/ep.md, "Redundant experts").
  int logical_experts = 0;
  int model_dim = 0;
  int inter_dim = 0;  // per expert; GEMM1 has 2 * inter_dim outputs (gate and up)
  int topk = 0;
  bool expert_biases = false;  // b1 and b2 (Mxfp4ExpertWeights): required where true, refused where false
  // Experts every token goes through beside its topk routed ones (DeepSeek-V3's and Kimi's shared
  // experts; docs/layer.md, "Shared experts"): the routed experts' shape, held by every rank, each
  // added to every token's output with weight shared_expert_scale after its routed rows.
  int shared_experts = 0;
  float shared_expert_scale = 1.f;
};

// The dispatch wire is each path's own (fp8 e4m3 with the path's x scale blocks, docs/layer.md).
struct QuantFormats {
  std::string activations;  // "fp8_e4m3"
  std::string weights;      // "mxfp4"
};

enum class CombineWire { bf16, fp8_blockwise_1x32 };

// Which expert-GEMM kernels run: the portable ones (CUDA cores, any GPU), the tensor-core ones
// (fp8 mma.sync, NVIDIA sm_89 and later) or the Hopper ones (wgmma, warp-specialised, sm_90a).
// What each needs of the shape and the GPU is one table (docs/layer.md, "Shape contract");
// automatic picks the fastest that can run: hopper, then tensor_core, else portable.
enum class KernelPath { automatic, portable, tensor_core, hopper };
std::string_view to_string(KernelPath path);
// "auto" (or "automatic"), "portable", "tensor_core" or "hopper"; an Error naming the value otherwise.
KernelPath path_from_name(std::string_view name);

// The path a runtime runs and why. note: empty, or (automatic only) why a faster path that this
// GPU has cannot run the config (shared memory past the GPU's limit), and where the path pads
// model_dim or inter_dim up to its multiple, to what and at what cost; the runtime also prints it
// once as a warning.
struct PathChoice {
  KernelPath requested = KernelPath::automatic;
  KernelPath path = KernelPath::portable;
  std::string note;
};
std::string_view to_string(CombineWire wire);

// How a kernel path's matrix instructions sum. exact: as fp32 sums do, to within about 1e-7 of
// the exact sum (portable, tensor_core). sm90_fp8_mma: wgmma with e4m3 operands keeps 13 bits per
// 32-k step (src/reference/fp8_mma_model.hpp), promoted into an fp32 sum once per scale block.
enum class Accumulation { exact, sm90_fp8_mma };

// How a path rounds, which the emulating reference repeats: values per fp8 scale along K of the
// activations it quantizes (x at dispatch, h after the activation) and how it sums.
// portable 32 and 32, tensor_core 64 and 64, both exact; hopper (by its bucket's scale modes) x
// 256 (128 where the padded model_dim is no multiple of 256) or model_dim (one scale per row), h 128 or one
// static scale (h_static: h unused), sm90_fp8_mma.
struct PathArithmetic {
  int x = 32, h = 32;
  Accumulation accumulation = Accumulation::exact;
  bool h_static = false;  // h in the one scale 2^fp8_block_exponent(activation_bound), Stage2 unpromoted
  // The shape the path's kernels run: the model's dims padded with zeros up to the path's multiple
  // (0: the model's own). x's last block, h's and the sums' chunks follow from it.
  int model_dim = 0, inter_dim = 0;
};

// The Hopper path's activation scales along K (docs/layer.md, "Scale modes"); the other paths
// keep their own blocks whatever these say. x: per block (256 values, 128 where model_dim is no
// multiple of 256; one promotion a block) or one per token row (Stage1 sums the whole K with no
// promotion). h: per 128 values, or, for a bounded activation, one static scale from its bound
// (no promotion in Stage2, no row maxima in Stage1).
enum class XScale { per_block, per_row };
enum class HScale { per_block, static_bound };
std::string_view to_string(XScale x);  // "block", "row"
std::string_view to_string(HScale h);  // "block", "static"

// Where the Hopper path's expert-GEMM kernels read the weights (docs/configs.md). mxfp4: layout
// v3, converted to e4m3 in registers at every use. fp8_resident: an e4m3 copy of the same values
// that prepare_weights makes once (twice the bytes of the MXFP4 weights), both wgmma operands read
// from shared memory: faster where the GEMMs are compute-bound. The other paths read MXFP4.
enum class WeightSource { mxfp4, fp8_resident };
std::string_view to_string(WeightSource weights);

// A stage's tile: along the tokens (the routed rows of one expert a block takes at once), and on
// the Hopper path along the weight rows (128, or 256 where the stage sums with no promotion:
// four consumer warpgroups, each tile's activations read once for twice the rows; docs/configs.md).
// The other paths' weight tiles are their own (128 on the tensor-core path, 64 on the portable one).
struct TileShape {
  int token_tile = 0;     // routed rows (tokens) per tile; kernels and their names call it bm
  int weight_tile = 128;  // Hopper: weight rows per tile; kernel names call it bw
  bool operator==(const TileShape&) const = default;
};

struct DispatchOptions {
  int cus = 0;              // blocks that run dispatch
  bool persistent = false;  // those blocks stay resident and loop over tokens
  int stride = 0;           // tokens a dispatch block takes per step
  bool operator==(const DispatchOptions&) const = default;
};

// What the kernels of one batch-size bucket are specialised on.
struct BucketConfig {
  int bucket = 0;  // a power of two from kMinBucket to kMaxBucket
  TileShape stage1, stage2;
  DispatchOptions dispatch;
  CombineWire combine_wire = CombineWire::bf16;
  WeightSource weights = WeightSource::mxfp4;
  XScale x_scale = XScale::per_block;
  HScale h_scale = HScale::per_block;
  bool bounds_check = false;
  bool operator==(const BucketConfig&) const = default;
};

// Whether a bucket's Hopper Stage1 (x per block) or Stage2 (h per 128) promotes partial sums.
bool stage_promotes(const BucketConfig& b, int stage);

inline constexpr int kMinBucket = 1;
inline constexpr int kMaxBucket = 32768;
inline constexpr int kBucketCount = 16;  // 1, 2, 4, ..., 32768

// The bucket of a call with `tokens` tokens: the power of two at or above it (0 -> 1).
// Throws megamoe::Error for a negative count or one above kMaxBucket.
int bucket_for_tokens(std::int64_t tokens);

// A bucket table and the card it was tuned on, named as the CUDA driver names the GPU ("NVIDIA
// H200", "NVIDIA H100 80GB HBM3"); empty where the config names none.
struct BucketTable {
  std::string card;
  std::array<BucketConfig, kBucketCount> buckets;  // ascending
};

// The bucket table's keys count tokens per rank where a rank holds keys_experts_per_rank experts
// (the config's bucket_keys, by default all of them: world 1). A call of T tokens on a rank of
// experts_per_rank experts takes the entry of T x keys_experts_per_rank / experts_per_rank tokens,
// rounded up to a bucket: the entry tuned for the same mean rows per expert (T x topk / experts
// per rank), which is what the tiles follow. So one table serves every world size.
struct Config {
  std::string name;
  std::string source;  // file path or "<builtin>/NAME.json"
  ModelShape model;
  Activation activation;
  QuantFormats quant;
  int world = 1;                  // the group size this config is resolved for (config_for_world)
  int keys_experts_per_rank = 0;  // experts a rank holds where the bucket keys count tokens
  std::array<BucketConfig, kBucketCount> buckets;  // the table in use, ascending (with_table picks it)
  std::string table;                               // the card the table in use was tuned on ("" : none named)
  // Every table the config holds (docs/configs.md, "A table per card"): its default (the file's
  // top-level "buckets", tuned on "card" where it names one) first, then "card_tables"' in order.
  std::vector<BucketTable> tables;

  const BucketConfig& bucket(int bucket_size) const;  // exact bucket size (a table key)
  // The table key a call of `tokens` tokens a rank takes, and its entry (see above). Throws
  // megamoe::Error for a negative count or one above kMaxBucket.
  int table_key(std::int64_t tokens) const;
  const BucketConfig& bucket_for_tokens(std::int64_t tokens) const;
};

// The name that picks the table tuned on `card` (with_table, RuntimeOptions::bucket_table): the
// card's own, or "default" for a table that names none.
std::string table_name(std::string_view card);

// `config` narrowed to the table of `card`: the one tuned on that card (its name as the driver
// gives it, compared exactly), or "default" for the default table; a runtime then takes it on
// any card. An Error naming the tables the config holds where it has none of that name.
Config with_table(Config config, std::string_view card);

// `config` with `table` as the table of `card`, in use: replacing the one it holds for that card,
// or added after the others (megamoe-tune writes the table of the card it runs on so).
Config with_card_table(Config config, const std::string& card, const std::array<BucketConfig, kBucketCount>& table);

// Which table a runtime on the GPU named `card` takes, and why (the runtime prints `note` once,
// as a warning where `warn`): `asked` (RuntimeOptions::bucket_table) where given, else the card's
// own, else the default. A config whose table in use was edited in code (its buckets differ from
// the table they came from) keeps its edits: no table is picked for it (with_table first picks
// the table to edit), and `asked` other than that table is an Error. warn: the table taken was
// tuned on another card than this one, so its buckets may run slower than a table of this card's
// would.
struct TableChoice {
  std::string card;   // the GPU's name
  std::string table;  // the card the table taken was tuned on ("" : the default, naming none)
  bool edited = false;  // the config's buckets as edited in code
  std::string note;
  bool warn = false;
};
TableChoice choose_table(const Config& config, std::string_view card, std::string_view asked = {});
// `config` with the choice's table in use (unchanged where it was edited).
Config with_chosen_table(Config config, const TableChoice& choice);

// `config` with each of its tables in use (default first), or the one of `card` alone where named
// (with_table): what a cache built ahead serves (megamoe-precompile, megamoe.precompile).
std::vector<Config> configs_for_tables(const Config& config, std::string_view card = {});

// Parses and checks JSON text; `source` names the file in error messages.
Config parse_config(std::string_view json_text, const std::string& source);

// Finds a config by name (MEGAMOE_CONFIG_DIR/NAME.json, then the built-in configs) or by
// path (anything ending in .json). MEGAMOE_BOUNDS_CHECK=1 turns the checked kernels on.
Config load_config(std::string_view name_or_path);

std::vector<std::string> builtin_config_names();

// `config` as a rank of a `world`-rank group runs it: model.experts_per_rank = experts / world.
// An Error names the model's experts and the world sizes that divide it where `world` does not,
// and the rank's count where it passes kMaxExpertsPerRank.
inline constexpr int kMaxExpertsPerRank = 1024;
Config config_for_world(Config config, int world);

// `config` with `experts` experts in all instead of model.experts (the same layer shape): one rank's
// share of a wider group run on its own, such as Kimi-K3's 112 experts of EP8 at world 1. Named
// "<name>_<experts>_experts", resolved for world 1 as a parsed config is; the bucket keys stay
// where they were.
Config with_experts(Config config, int experts);

// `config` with `redundant` expert slots beyond its model's experts, for load balancing (EPLB):
// model.experts becomes model.logical_experts + redundant physical slots, the ids a call takes;
// the caller places a logical expert's weights in each of its slots (gather_experts) and maps
// each route to one of its replicas. Named "<name>_plus_<redundant>_slots"; the bucket keys stay
// where they were (the tiles follow the rows per slot). An Error for redundant < 0 or more slots
// than the group routing's limit.
Config with_redundant_experts(Config config, int redundant);

// `config` with `count` shared experts of weight `scale` (model.shared_experts, shared_expert_scale;
// count 0: none). Named "<name>_with_<count>_shared" (or "_without_shared"), unchanged where it
// already has them. An Error for a count outside 0..kMaxSharedExperts, topk + count past 64, or a
// scale that is not finite.
inline constexpr int kMaxSharedExperts = 16;
inline constexpr int kMaxSlotsPerToken = 64;  // topk + shared_experts
Config with_shared_experts(Config config, int count, float scale = 1.f);

// `model`'s layer (shape, activation, formats) with `buckets`'s bucket table (tiles, dispatch,
// combine wire, ...), named "<model>_with_<buckets>_buckets": the same model tuned another way, for
// timing side by side (megamoe-bench --against).
Config with_buckets_of(const Config& model, const Config& buckets);

}  // namespace megamoe
