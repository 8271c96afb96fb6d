// Workloads for the tools and the GPU tests: random MXFP4 expert weights, random bf16 inputs,
// routings (generated or read from a file), and the check of a layer output against the CPU
// references.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/weights.hpp"

namespace megamoe::workload {

// Random MXFP4 weights: uniform random e2m1 codes, block scales around 2^s with s chosen so
// that each GEMM's outputs are of order 1 for inputs of order 1; biases N(0, 0.5^2) where
// shape.expert_biases.
Mxfp4ExpertWeights random_weights(const ModelShape& shape, std::uint64_t seed);

// The same for a group of `world` ranks: world x experts_per_rank experts, each drawn from the
// seed and its global id alone (so a row sent to the wrong expert, or to the right local id of
// the wrong rank, meets other weights); slice_experts gives one rank's.
Mxfp4ExpertWeights random_group_weights(const ModelShape& shape, int world, std::uint64_t seed);
Mxfp4ExpertWeights slice_experts(const Mxfp4ExpertWeights& w, int first, int count);

// The model's shared experts (shape.shared_experts of them, the routed experts' shape), drawn as
// random_group_weights draws its experts, from streams of their own.
Mxfp4ExpertWeights random_shared_weights(const ModelShape& shape, std::uint64_t seed);
// A rank's routed experts followed by the model's shared ones (random_shared_weights of the same
// seed) where it has them, as prepare_weights takes them; the routed ones alone where it has none.
Mxfp4ExpertWeights with_shared_weights(Mxfp4ExpertWeights routed, const ModelShape& shape, std::uint64_t seed);

// The random sequence of one call's inputs (routing, x, the check's token subset): from the seed,
// the call's token count and which draw of that count it is, so that a size's inputs do not
// depend on the sizes a tool was given before it.
std::mt19937_64 inputs_rng(std::uint64_t seed, std::int64_t tokens, int draw = 0);

// [tokens][dim] bf16 values drawn from N(0, 1).
std::vector<std::uint16_t> random_bf16(std::int64_t tokens, int dim, std::mt19937_64& rng);

// The inputs the accuracy policy checks every path on (docs/layer.md, "Accuracy"):
//  - normal:   N(0, 1), as random_bf16 draws it;
//  - outliers: LLM-like hidden states: heavy tails (Student's t with 4 degrees of freedom, unit
//              variance) and outlier_channels(dim) channels, the same in every token, 30x;
//  - massive:  outliers, plus one token in 64 (at least one a call) whose one massive channel
//              (the same in every such token) is 1000x, or 10000x in every other such token.
enum class InputKind { normal, outliers, massive };
const std::vector<std::string>& input_kinds();
InputKind parse_input_kind(const std::string& name);  // throws Error naming the value and the choices
const char* to_string(InputKind kind);
inline constexpr float kOutlierScale = 30.f;
inline constexpr int kMassiveEvery = 64;
int outlier_channels(int dim);  // dim / 1024, at least 2

struct Inputs {
  std::vector<std::uint16_t> x;              // [tokens][dim] bf16
  std::vector<int> outlier_channels;          // outliers, massive: the channels scaled 30x
  int massive_channel = -1;                   // massive: the channel of the massive tokens
  std::vector<std::int64_t> massive_tokens;   // massive: the tokens that carry it, in order
};
Inputs random_inputs(InputKind kind, std::int64_t tokens, int dim, std::mt19937_64& rng);

struct Routing {
  std::int64_t tokens = 0;
  int topk = 0;
  std::vector<int> ids;        // [tokens][topk]
  std::vector<float> weights;  // [tokens][topk]
  int planted_bad_ids = 0;     // ids outside [-1, experts) put in on purpose
};

// uniform: topk distinct experts per token, softmax weights. single: every slot of every token
// to expert 0. sparse: topk distinct experts among the first topk + 4 (the rest stay empty).
// holes: uniform with 30% of slots -1 and 1 token in 16 with no expert at all. bad: uniform with
// 1 slot in 50 given an id outside [-1, experts). one_rank: topk distinct experts among the first
// experts_per_rank (over several ranks: every slot to rank 0's experts). zipf: topk distinct
// experts per token, expert e drawn with weight 1 / (e + 1) (skewed: the first experts, rank 0's,
// the hottest). ramp: expert e takes 2e + 1 rows (1, 3, 5, ...),
// dealt to the tokens in turn, slot 0 of every token first, until the slots or the experts run
// out (the slots left are -1), so that one call has experts of every row count up to
// 2 x experts - 1 (every width of a last tile); a token's experts are distinct while
// 2 x experts - 1 <= tokens.
Routing make_routing(const std::string& kind, std::int64_t tokens, int topk, int experts, std::mt19937_64& rng,
                     int experts_per_rank = 0);
const std::vector<std::string>& routing_kinds();

// Redundant experts (EPLB; docs/ep.md): which logical expert each of `physical` slots holds.
// Every logical expert gets a slot; each further slot goes to the expert with the most load per
// replica so far (load: its routed rows, indexed by logical id); the slots are then shuffled, so
// that replicas and their originals land on any rank.
std::vector<int> eplb_placement(int logical, int physical, const std::vector<long long>& load, std::mt19937_64& rng);
// Each logical expert's routed rows in `r` (ids outside [0, logical) not counted).
std::vector<long long> expert_load(const Routing& r, int logical);
// `logical` routed to slots as an engine's EPLB maps it before the call: each route to one of its
// expert's replicas at random; -1 stays -1, and a bad id stays outside the slots.
Routing to_physical(const Routing& logical, const std::vector<int>& physical_to_logical, int logical_experts,
                    std::mt19937_64& rng);

// Text format: "megamoe-routing 1", then "tokens T topk K", then per token K ids and K weights.
Routing read_routing(const std::string& path);
void write_routing(const Routing& r, const std::string& path);

// The bars of a check (docs/layer.md, accuracy): relL2 against the exact reference over the
// call; against the emulating one over the call, and over each token's row alone, both past the
// reach of the h flips that the reference cannot decide (reference::rel_l2_beyond). An fp8
// combine wire rounds each pair's output to e4m3 once more, which turns the paths' last-bit
// differences into whole e4m3 steps now and then: its bars against the emulating reference are
// wider.
inline constexpr double kExactBar = 0.06;
struct EmulatedBars {
  double call, token;
};
EmulatedBars emulated_bars(CombineWire wire);

// One token's row against both references (reported for the massive tokens).
struct TokenCheck {
  std::int64_t token = 0;
  double rel_l2_exact = 0, rel_l2_emulated = 0;
};

struct CheckResult {
  double rel_l2_exact = 0, rel_l2_emulated = 0;
  std::vector<TokenCheck> massive;  // each massive token's own (always among the checked tokens)
  double worst_token_emulated = 0;  // the largest relL2 of one token's row against the emulating reference
  // h values of the checked tokens (over the whole group's check) that the activations' error
  // can round either way: the reference allows each its one step (reference::LayerOutputs)
  std::size_t h_near_boundary = 0;
  std::size_t unwritten = 0;  // NaN (poison) elements left in y among the checked tokens
  std::size_t checked_tokens = 0;
  bool subset = false;  // the references covered a random subset of the tokens
  EmulatedBars bars{};   // for the call's combine wire
  bool pass() const {
    return unwritten == 0 && rel_l2_exact <= kExactBar && rel_l2_emulated <= bars.call &&
           worst_token_emulated <= bars.token;
  }
};

// One rank's call: its inputs and its output y [tokens][model_dim] (bf16, from the device).
struct RankOutput {
  const std::vector<std::uint16_t>* x;
  const Routing* routing;
  const std::vector<std::uint16_t>* y;
  const std::vector<std::int64_t>* massive = nullptr;  // tokens always checked and reported one by one
  // Over nodes (the nvshmem transport's): the rank's node, and the node serving each slot
  // ([tokens][topk], -1 none), whose sums the emulating reference follows
  // (reference::LayerInputs::slot_nodes). Null: one node.
  int node = 0;
  const std::vector<int>* slot_nodes = nullptr;
};

// Every rank's output of a group's call against both CPU references (ids global; w holds every
// rank's experts, and maybe more: ids at or past `experts` are bad), each over all its tokens or
// over `max_tokens` random ones; one result a rank. shared: the model's shared experts (config's
// model.shared_experts of them, weighted model.shared_expert_scale), or null where it has none.
std::vector<CheckResult> check_group(const Config& config, const Mxfp4ExpertWeights& w, int experts,
                                     const std::vector<RankOutput>& ranks, std::size_t max_tokens,
                                     std::mt19937_64& rng, PathArithmetic arithmetic,
                                     const Mxfp4ExpertWeights* shared = nullptr);

// Compares y [tokens][model_dim] (bf16, from the device) with both CPU references over all
// tokens, or over `max_tokens` random ones when there are more.
// arithmetic: how the run's path rounds and sums (Runtime::arithmetic), for the emulating reference.
CheckResult check_layer(const Config& config, const Mxfp4ExpertWeights& w, const std::vector<std::uint16_t>& x,
                        const Routing& r, const std::vector<std::uint16_t>& y, std::size_t max_tokens,
                        std::mt19937_64& rng, PathArithmetic arithmetic,
                        const std::vector<std::int64_t>* massive = nullptr, const Mxfp4ExpertWeights* shared = nullptr);

// A config by name or path for `world` ranks; with experts_per_rank > 0, the model cut to
// experts_per_rank x world experts (with_experts): one rank's share of a wider group, such as
// Kimi-K3's 112 experts of EP8 at world 1.
Config load_for_world(const std::string& name_or_path, int world, int experts_per_rank);


}  // namespace megamoe::workload
