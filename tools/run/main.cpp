// megamoe-run: runs the MoE layer of a config, on one GPU or as every rank of an expert-parallel
// group, with fresh random inputs per batch size (each output poisoned before its call) and,
// with --check, compares every rank's output with the CPU references (docs/layer.md, accuracy):
// PASS/FAIL per batch size.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/cli.hpp"
#include "common/workload.hpp"
#include "common/kernel_limits.hpp"
#include "megamoe/megamoe.hpp"

using namespace megamoe;

namespace {

constexpr const char* kTool = "megamoe-run";
[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error(kTool, msg); }

constexpr const char* kDescription =
    "Runs the MoE layer of a config with fresh random bf16 inputs and random MXFP4 weights, the output poisoned "
    "(NaN) before each call: on GPU 0 (world 1: every expert local), or as the W ranks of an expert-parallel group "
    "(each rank its own tokens, experts and weights). Each size: a warm-up call, the call checked (launched as an "
    "engine's, each kernel free to start while the one before it ends), and a call with events between the "
    "stages, for the stage times, which must give the same bits.";

struct Args {
  std::string config, route = "uniform", routing_file, save_routing, bootstrap, inputs_name = "normal";
  std::string transport_name = "loopback";
  std::string table;  // --bucket-table: a card's bucket table instead of the GPU's own
  workload::InputKind inputs = workload::InputKind::normal;
  KernelPath path = KernelPath::automatic;
  std::vector<std::int64_t> sizes = {1, 8, 128, 1024, 8192};
  std::vector<int> devices;  // peer and ipc: rank r's GPU (empty: GPU r)
  std::uint64_t seed = 123;
  std::size_t ref_tokens = 256;
  bool check = false, serial = false, taper = false;
  int world = 1, rank = -1;  // rank: a child process of --transport ipc or nvshmem
  int node_size = 0;         // --transport nvshmem: ranks a node
  int experts_per_rank = 0;  // 0: the config's model.experts / world
  int redundant = 0;         // expert slots beyond the model's (EPLB)
  int shared = -1;           // shared experts (-1: the config's)
  float shared_scale = 1.f;
  bool shared_scale_given = false;
  long long capacity = 0;    // routed_rows_capacity (0: the worst case)
  Transport transport = Transport::loopback;
};

// The inputs' flags: the config, the sizes, the routing, x, the seed, the check.
void add_input_flags(CLI::App& app, Args& a) {
  cli::add_config(app, a.config)->required();
  cli::add_int_list(app, "--bs", a.sizes, "comma-separated token counts per rank", 0);
  std::vector<std::string> kinds = workload::routing_kinds();
  app.add_option("--route", a.route,
                 "uniform, single, sparse, holes, bad, ramp, one_rank (every slot to rank 0's experts), zipf "
                 "(expert e drawn with weight 1 / (e + 1): skewed)")
      ->type_name("KIND")->check(cli::one_of(kinds));
  app.add_option("--routing-file", a.routing_file,
                 "replay a routing (ids and weights) from a file; its token count is the size (world 1)")
      ->type_name("F");
  app.add_option("--save-routing", a.save_routing,
                 "write the routing of the last size to F (world 1; replay it with --routing-file)")
      ->type_name("F");
  app.add_option("--inputs", a.inputs_name,
                 "x drawn as normal (N(0, 1)), outliers (heavy tails and a few channels 30x) or massive (outliers, "
                 "and one token in 64 with one channel 1000x or 10000x; with --check each such token's relL2 is "
                 "printed too)")
      ->type_name("KIND")->check(cli::one_of({"normal", "outliers", "massive"}));
  app.add_option("--seed", a.seed,
                 "random seed: the weights come from it (over several ranks each expert from it and its global id), "
                 "each call's inputs from it, the rank, the call's size and how many calls of that size came before")
      ->type_name("S")->check(cli::at_least(0, "an integer"));
  app.add_flag("--check", a.check,
               "compare with the CPU references: relL2 against the exact (dequantized weights, fp32) one must be <= "
               "0.06; against the one that emulates the path's quantizers and sums, <= 1e-3 over the call and <= "
               "5e-3 for every token (with an fp8 combine wire: 2.5e-3 and 2e-2); over several ranks the worst rank");
  app.add_option("--ref-tokens", a.ref_tokens,
                 "references over at most N random tokens of a call (all of a call up to bucket 256, as "
                 "docs/contract.md's relL2 is over the whole output)")
      ->type_name("N")->check(cli::at_least(0));
  cli::add_path(app, a.path);
  cli::add_bucket_table(app, a.table,
                        "the table tuned on this GPU's card, else the config's default (the header says which)");
}

// The group's flags: its world, transport, GPUs, nodes, capacity, slots and shared experts.
void add_group_flags(CLI::App& app, Args& a) {
  app.add_option("--world", a.world, "ranks of the group; each holds model.experts / W experts")
      ->type_name("W")->check(cli::in_range(1, kMaxWorld));
  cli::add_experts_per_rank(app, a.experts_per_rank, 1);
  app.add_option("--capacity", a.capacity,
                 "routed_rows_capacity: routed rows a rank holds (0: the worst case, W x tokens x topk); rows past "
                 "it are dropped, counted and printed, and the size FAILs (their tokens' outputs lack them)")
      ->type_name("R")->check(cli::at_least(0, "a count of rows"));
  app.add_option("--redundant-experts", a.redundant,
                 "N expert slots beyond the model's (EPLB): the W ranks hold model.experts + N slots; the hottest "
                 "experts of a first sample of the routing get the extra replicas, the slots are shuffled over the "
                 "ranks, each route goes to one of its expert's replicas, and --check compares with the references "
                 "over the logical experts")
      ->type_name("N")->check(cli::at_least(0));
  app.add_option("--shared-experts", a.shared,
                                "N shared experts (default: the config's model.shared_experts): every token goes "
                                "through them beside its routed experts, in the same launches; each rank holds them "
                                "(random, of the routed experts' shape) and --check's references add them")
      ->type_name("N")->check(cli::at_least(0));
  app.add_option_function<float>(
         "--shared-scale", [&a](float v) { a.shared_scale = v, a.shared_scale_given = true; },
         "the shared experts' weight in every token's sum (default 1)")
      ->type_name("F")->check(cli::finite(-3.4e38, 3.4e38, "a finite number"));
  app.add_option("--transport", a.transport_name,
                 "loopback (every rank on GPU 0), peer (rank r on GPU r, one process), ipc (a process of this tool "
                 "per rank, rank r on GPU r), nvshmem (as ipc, the group on NVSHMEM: docs/ep.md, \"Over nodes: "
                 "NVSHMEM\")")
      ->type_name("T")->check(cli::one_of({"loopback", "peer", "ipc", "nvshmem"}));
  app.add_option("--devices", a.devices,
                 "peer, ipc and nvshmem: rank r on GPU LIST[r] (W entries; default 0,1,...,W-1). With ipc or nvshmem, "
                 "ranks may share a GPU (0,0: two processes on GPU 0, which then runs one process's kernels at a "
                 "time, slices of time each: slow, for checking)")
      ->delimiter(',')->type_name("LIST")->check(cli::at_least(0, "GPU ordinals"));
  app.add_option("--node-size", a.node_size,
                 "nvshmem: N consecutive ranks a node (0: one node); a token's row goes to another node once, by "
                 "NVSHMEM's puts, and is forwarded and summed there (1 or 2: the put path on one GPU too); --check "
                 "follows the sums")
      ->type_name("N")->check(cli::at_least(0));
  app.add_flag("--serial", a.serial, "the serial path: dispatch, the expert GEMMs and combine as separate launches");
  app.add_flag("--taper", a.taper, "rank r gets bs x (W - r) / W tokens instead of bs (unequal token counts)");
  app.add_option("--ipc-rank", a.rank)->group("");  // internal: a child process of ipc or nvshmem
  app.add_option("--ipc-bootstrap", a.bootstrap)->group("");
}

// The rules across flags, once every flag is read.
void check_rules(Args& a) {
  a.inputs = workload::parse_input_kind(a.inputs_name);
  a.transport = transport_from_name(a.transport_name);
  if (a.sizes.empty()) usage_error("--bs needs at least one size");
  if (!a.devices.empty()) {
    if (a.transport == Transport::loopback) usage_error("--devices is for --transport peer, ipc or nvshmem");
    if (int(a.devices.size()) != a.world)
      usage_error(fmt::format("--devices has {} entries, expected --world = {}", a.devices.size(), a.world));
  }
  if (a.node_size != 0 && a.transport != Transport::nvshmem) usage_error("--node-size is for --transport nvshmem");
  if (a.node_size > 0 && a.world % a.node_size)
    usage_error(fmt::format("--node-size expects 0 or a divisor of --world = {}, got {}", a.world, a.node_size));
  if (a.shared_scale_given && a.shared <= 0) usage_error("--shared-scale is for --shared-experts N with N > 0");
  if (a.world > 1 && (!a.routing_file.empty() || !a.save_routing.empty()))
    usage_error("--routing-file and --save-routing are for --world 1");
}

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app;
  cli::describe(app, kTool, kDescription,
                "Exit status: 0 on success, 1 on a failed check or error, 2 on bad usage, 3 when no GPU is present.");
  add_input_flags(app, a);
  add_group_flags(app, a);
  cli::parse(app, argc, argv);
  check_rules(a);
  return a;
}

// The nvshmem transport over nodes (node_size below the world): another node's slots of a token
// come home summed, which the header says and the check's reference follows.
bool over_nodes(const Args& a) {
  return a.transport == Transport::nvshmem && a.node_size > 0 && a.node_size < a.world;
}

// One rank's call inputs, uploaded, with its output poisoned.
struct RankCall {
  std::int64_t tokens = 0;
  workload::Routing routing;  // over the logical experts (the references'); the kernels get it on slots
  std::vector<std::uint16_t> x;
  std::vector<std::int64_t> massive;  // --inputs massive: the tokens with a massive channel
  std::vector<int> slot_nodes;        // over nodes: the node serving each slot (workload::RankOutput)
  DeviceBuffer d_x, d_y, d_ids, d_w;
};

// Each slot's logical expert: itself, or with redundant slots the placement an engine's EPLB
// would make from a first look at the load (the same on every rank: from the seed alone).
std::vector<int> slot_placement(const Args& a, const ModelShape& m) {
  std::vector<int> placement(m.experts);
  std::iota(placement.begin(), placement.end(), 0);
  if (m.experts > m.logical_experts) {
    std::mt19937_64 rng = workload::inputs_rng(a.seed + 11, 4096, 0);
    const workload::Routing sample =
        workload::make_routing(a.route, 4096, m.topk, m.logical_experts, rng, m.experts_per_rank);
    placement =
        workload::eplb_placement(m.logical_experts, m.experts, workload::expert_load(sample, m.logical_experts), rng);
  }
  return placement;
}

// Every rank's call of size bs (draw: how many calls of that size came before), uploaded.
RankCall make_call(const Args& a, Runtime& rt, std::int64_t bs, int draw, const std::vector<int>& placement,
                   const workload::Routing* replay) {
  const ModelShape& m = rt.config().model;
  const int r = rt.rank(), world = rt.world(), experts = m.logical_experts;
  RankCall c;
  c.tokens = a.taper ? bs * (world - r) / world : bs;
  std::mt19937_64 rng = workload::inputs_rng(a.seed + 1000003ull * r, c.tokens, draw);
  c.routing = replay ? *replay : workload::make_routing(a.route, c.tokens, m.topk, experts, rng, m.experts_per_rank);
  workload::Inputs in = workload::random_inputs(a.inputs, c.tokens, m.model_dim, rng);
  c.x = std::move(in.x);
  c.massive = std::move(in.massive_tokens);
  Device& dev = rt.device();
  const std::size_t xy = std::max<std::size_t>(16, c.x.size() * 2);
  c.d_x = DeviceBuffer(dev, xy), c.d_y = DeviceBuffer(dev, xy);
  c.d_ids = DeviceBuffer(dev, std::max<std::size_t>(4, c.routing.ids.size() * 4));
  c.d_w = DeviceBuffer(dev, std::max<std::size_t>(4, c.routing.weights.size() * 4));
  dev.copy_to_device(c.d_x.get(), c.x.data(), c.x.size() * 2);
  const workload::Routing slots = workload::to_physical(c.routing, placement, experts, rng);
  dev.copy_to_device(c.d_ids.get(), slots.ids.data(), slots.ids.size() * 4);
  if (over_nodes(a))  // the node serving each slot (its physical expert's rank's node)
    for (int id : slots.ids)
      c.slot_nodes.push_back(id >= 0 && id < m.experts ? id / m.experts_per_rank / a.node_size : -1);
  dev.copy_to_device(c.d_w.get(), c.routing.weights.data(), c.routing.weights.size() * 4);
  return c;
}

// This process's ranks with their weights and streams, and one size's calls.
struct RankSet {
  std::vector<Runtime*> ranks;
  std::vector<std::unique_ptr<PreparedWeights>> prepared;
  std::vector<StreamHandle> streams;
  std::vector<RankCall> calls;

  // profile: events between the stages (the stage times); without, the launches are an engine's
  // (each kernel may start while the one before it ends).
  void call_all(bool profile) {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      RankCall& c = calls[i];
      ranks[i]->set_profile(profile);
      ranks[i]->device().fill_bytes(c.d_y.get(), 0xFF, c.d_y.bytes());  // NaN poison
      ranks[i]->forward(*prepared[i], c.d_x.get(), static_cast<int*>(c.d_ids.get()), static_cast<float*>(c.d_w.get()),
                        c.d_y.get(), c.tokens, streams[i]);
    }
    for (std::size_t i = 0; i < ranks.size(); ++i) ranks[i]->device().synchronize(streams[i]);
  }
  std::vector<std::vector<std::uint16_t>> read_outputs() const {
    std::vector<std::vector<std::uint16_t>> out(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      out[i].resize(calls[i].x.size());
      ranks[i]->device().copy_to_host(out[i].data(), calls[i].d_y.get(), out[i].size() * 2);
    }
    return out;
  }
};

// A size's row: the worst rank's stage times and relL2, what was checked, the verdict's parts.
struct SizeRow {
  StageTimes t;
  workload::CheckResult worst;
  std::size_t checked = 0;
  bool ok = true, subset = false;
  std::string notes;
};

// The stage times (the slowest rank's) and what the kernels counted (bad ids: three calls).
void take_times_and_errors(RankSet& g, SizeRow& row) {
  for (std::size_t i = 0; i < g.ranks.size(); ++i) {
    Runtime& rt = *g.ranks[i];
    StageTimes ti = rt.last_stage_times();
    StageTimes& t = row.t;
    t.route_ms = std::max(t.route_ms, ti.route_ms), t.quantize_ms = std::max(t.quantize_ms, ti.quantize_ms);
    t.stage1_ms = std::max(t.stage1_ms, ti.stage1_ms), t.stage2_ms = std::max(t.stage2_ms, ti.stage2_ms);
    t.combine_ms = std::max(t.combine_ms, ti.combine_ms), t.total_ms = std::max(t.total_ms, ti.total_ms);
    CallErrors errors = rt.take_errors();
    row.ok = row.ok && errors.bad_ids == 3LL * g.calls[i].routing.planted_bad_ids && errors.bounds_violations == 0 &&
             errors.dropped_rows == 0;
    if (errors.any())
      row.notes += fmt::format("  rank {}: kernels reported {} bad ids (first at slot {}), {} bounds violations, {} "
                               "dropped rows\n",
                               rt.rank(), errors.bad_ids, errors.first_bad_slot, errors.bounds_violations,
                               errors.dropped_rows);
  }
}

// The references' verdicts, the worst rank's numbers, and a note per fact worth a line.
void take_checks(const RankSet& g, const std::vector<workload::CheckResult>& results, SizeRow& row) {
  bool flips_noted = false;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const workload::CheckResult& res = results[i];
    if (g.calls[i].tokens == 0) continue;
    row.ok = row.ok && res.pass();
    if (res.unwritten)
      row.notes += fmt::format("  rank {}: {} output elements were never written\n", g.ranks[i]->rank(), res.unwritten);
    row.worst.rel_l2_exact = std::max(row.worst.rel_l2_exact, res.rel_l2_exact);
    row.worst.rel_l2_emulated = std::max(row.worst.rel_l2_emulated, res.rel_l2_emulated);
    row.worst.worst_token_emulated = std::max(row.worst.worst_token_emulated, res.worst_token_emulated);
    row.checked += res.checked_tokens;
    row.subset = row.subset || res.subset;
    if (!flips_noted && res.h_near_boundary)  // one count for the group's check
      row.notes += fmt::format("  {} h values the activations' error can round either way (allowed one step each)\n",
                               res.h_near_boundary);
    flips_noted = true;
    for (const workload::TokenCheck& tc : res.massive)
      row.notes += fmt::format("  {}massive token {}: relL2 against the exact reference {:.3e}, the emulating one {:.3e}\n",
                               g.ranks[0]->world() > 1 ? fmt::format("rank {}: ", g.ranks[i]->rank()) : "", tc.token,
                               tc.rel_l2_exact, tc.rel_l2_emulated);
  }
}

void print_row(const Args& a, const RankSet& g, std::int64_t bs, const SizeRow& row) {
  const Runtime& first = *g.ranks[0];
  const std::string verdict = a.check ? (row.ok ? "PASS" : "FAIL") : (row.ok ? "ran" : "FAIL");
  if (first.world() > 1 && g.ranks.size() == 1) fmt::print("rank {}: ", first.rank());  // one process of ipc
  const StageTimes& t = row.t;
  fmt::print("{:>6} {:>6} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f} {:>9.1f} {:>10.3e} {:>10.3e} {:>10.3e} {:>7} {:>6}\n",
             bs, first.config().bucket_for_tokens(bs).bucket, t.route_ms * 1e3, t.quantize_ms * 1e3, t.stage1_ms * 1e3,
             t.stage2_ms * 1e3, t.combine_ms * 1e3, t.total_ms * 1e3, row.worst.rel_l2_exact, row.worst.rel_l2_emulated,
             row.worst.worst_token_emulated, fmt::format("{}{}", row.checked, row.subset ? "*" : ""), verdict);
  fmt::print("{}", row.notes);
  std::fflush(stdout);  // a row as soon as it is known, also into a pipe (a run cut short keeps its rows)
}

// One size on the group: a warm-up call, the call checked, a call with events that must give the
// same bits; then its row. Returns whether it passed.
bool run_size(const Args& a, RankSet& g, std::int64_t bs, int draw, const std::vector<int>& placement,
              const Mxfp4ExpertWeights& all_weights, const Mxfp4ExpertWeights& shared, const workload::Routing* replay) {
  Runtime& first = *g.ranks[0];
  g.calls.clear();
  for (Runtime* rt : g.ranks) g.calls.push_back(make_call(a, *rt, bs, draw, placement, replay));
  g.call_all(false);  // warm-up
  g.call_all(false);  // the call checked
  const std::vector<std::vector<std::uint16_t>> ys = g.read_outputs();
  g.call_all(true);  // the call timed: the same bits
  SizeRow row;
  row.ok = g.read_outputs() == ys;
  if (!row.ok) row.notes = "  the timed call's outputs differ from the checked call's on the same inputs\n";
  take_times_and_errors(g, row);
  const bool nodes = over_nodes(a);
  std::vector<workload::RankOutput> outputs;
  for (std::size_t i = 0; i < g.ranks.size(); ++i) {
    RankCall& c = g.calls[i];
    outputs.push_back({&c.x, &c.routing, &ys[i], &c.massive, nodes ? g.ranks[i]->rank() / a.node_size : 0,
                       nodes ? &c.slot_nodes : nullptr});
  }
  std::mt19937_64 rng = workload::inputs_rng(a.seed + 7, bs, draw);
  if (a.check)
    take_checks(g,
                workload::check_group(first.config(), all_weights, first.config().model.logical_experts, outputs,
                                      a.ref_tokens, rng, first.arithmetic(bs), &shared),
                row);
  print_row(a, g, bs, row);
  if (!a.save_routing.empty()) workload::write_routing(g.calls[0].routing, a.save_routing);
  return row.ok;
}

// Runs every size on `ranks` (this process's ranks of the group: all of them, or one with ipc)
// and prints a row per size; returns the number of failed sizes.
int run_sizes(const Args& a, std::vector<Runtime*> ranks, const Mxfp4ExpertWeights& all_weights,
              const Mxfp4ExpertWeights& shared, const workload::Routing* replay) {
  const ModelShape& m = ranks[0]->config().model;
  const std::vector<int> placement = slot_placement(a, m);
  RankSet g;
  g.ranks = ranks;
  for (Runtime* rt : ranks) {
    Mxfp4ExpertWeights held =
        gather_experts(all_weights, std::vector<int>(placement.begin() + rt->rank() * m.experts_per_rank,
                                                     placement.begin() + (rt->rank() + 1) * m.experts_per_rank));
    g.prepared.push_back(rt->prepare_weights(m.shared_experts ? append_experts(held, shared) : held));
    g.streams.push_back(rt->device().create_stream());
  }
  if (g.prepared[0]->resident_bytes)
    fmt::print("fp8-resident copy of the weights: {:.2f} GB a rank (buckets with weights fp8_resident)\n",
               g.prepared[0]->resident_bytes / 1e9);
  fmt::print("{:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>10} {:>10} {:>7} {:>6}\n", "tokens", "bucket",
             "route_us", "quant_us", "stage1_us", "stage2_us", "combine_us", "total_us", "relL2_ref", "relL2_emu",
             "worst_tok", "checked", "result");
  int failures = 0;
  std::map<std::int64_t, int> draws;  // a size listed again gets fresh inputs
  for (std::int64_t bs : a.sizes) failures += !run_size(a, g, bs, draws[bs]++, placement, all_weights, shared, replay);
  for (std::size_t i = 0; i < ranks.size(); ++i) ranks[i]->device().destroy_stream(g.streams[i]);
  return failures;
}

RuntimeOptions options_for(const Args& a, std::int64_t max_tokens) {
  RuntimeOptions o;
  o.max_tokens = int(std::max<std::int64_t>(1, max_tokens));
  o.profile = true;
  o.path = a.path;
  o.world = a.world;
  o.transport = a.transport;
  o.node_size = a.node_size;
  o.devices = a.devices;
  o.serial = a.serial;
  o.routed_rows_capacity = a.capacity;
  o.redundant_experts = a.redundant;
  o.bucket_table = a.table;
  return o;
}

void print_header(const Runtime& rt, const Args& a) {
  const Config& cfg = rt.config();
  const ModelShape& m = cfg.model;
  Runtime& r = const_cast<Runtime&>(rt);
  const std::string nodes =
      over_nodes(a)
          ? fmt::format(", {} nodes of {}: a token's row crosses to a node once, forwarded and summed there",
                        a.world / a.node_size, a.node_size)
          : a.transport == Transport::nvshmem ? ", one node: load and store" : "";
  fmt::print("config {}: {} experts{} ({} a rank){}, model_dim {}, inter_dim {}, topk {}, {} on {} ({})\n", cfg.name,
             m.experts,
             m.experts > m.logical_experts ? fmt::format(" slots for {} logical experts (EPLB)", m.logical_experts) : "",
             m.experts_per_rank,
             m.shared_experts ? fmt::format(" and {} shared (weight {}) on every rank", m.shared_experts,
                                            m.shared_expert_scale)
                              : "",
             m.model_dim, m.inter_dim, m.topk, to_string(cfg.activation.kind), r.device().name(), r.device().arch());
  fmt::print("kernels: {} path; world {}{}{}; routing: {}; inputs: {}; references: over at most {} random tokens of each "
             "call{}{}\n",
             to_string(rt.path()), a.world, a.world > 1 ? fmt::format(" ({}{})", to_string(a.transport), nodes) : "",
             a.world > 1 ? (a.serial ? ", serial" : ", fused") : "", a.routing_file.empty() ? a.route : "file " + a.routing_file,
             workload::to_string(a.inputs), a.ref_tokens, a.inputs == workload::InputKind::massive ? " and every massive token" : "",
             a.world > 1 ? " of each rank (the worst rank's numbers)" : "");
  fmt::print("{}\n", rt.table_choice().note);
}

// --transport ipc or nvshmem: this tool once per rank, each on its GPU, meeting in a fresh folder.
int spawn_ipc_ranks(const Args& a, int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("megamoe-run-{}", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<pid_t> children;
  for (int r = 0; r < a.world; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw Error("megamoe-run: fork failed");
    if (pid == 0) {
      std::vector<std::string> args(argv, argv + argc);
      args.insert(args.end(), {"--ipc-rank", std::to_string(r), "--ipc-bootstrap", dir.string()});
      std::vector<char*> cargs;
      for (auto& s : args) cargs.push_back(s.data());
      cargs.push_back(nullptr);
      execv("/proc/self/exe", cargs.data());
      _exit(127);
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (int r = 0; r < a.world; ++r) {
    int status = 0;
    waitpid(children[r], &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code != 0) fmt::print("rank {} exited with status {}\n", r, code);
    worst = std::max(worst, code == 3 ? 3 : code ? 1 : 0);
  }
  fs::remove_all(dir);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // loopback ranks' streams on queues of their own (docs/ep.md)
  const Args a = parse(argc, argv);
  return cli::run_reporting_errors([&] {
    const bool processes = a.transport == Transport::ipc || a.transport == Transport::nvshmem;
    if (a.world > 1 && processes && a.rank < 0) return spawn_ipc_ranks(a, argc, argv);
    workload::Routing replay;
    std::vector<std::int64_t> sizes = a.sizes;
    if (!a.routing_file.empty()) replay = workload::read_routing(a.routing_file), sizes = {replay.tokens};
    Args args = a;
    args.sizes = sizes;
    RuntimeOptions options = options_for(a, *std::max_element(sizes.begin(), sizes.end()));
    std::vector<std::unique_ptr<Runtime>> owned;
    Config config = workload::load_for_world(a.config, a.world, a.experts_per_rank);
    if (a.shared >= 0) config = with_shared_experts(std::move(config), a.shared, a.shared_scale);
    if (a.rank >= 0) {  // a rank of --transport ipc or nvshmem
      options.rank = a.rank, options.device = a.devices.empty() ? a.rank : a.devices[std::size_t(a.rank)];
      options.all_gather = folder_all_gather(a.bootstrap, a.rank, a.world);
      owned.push_back(Runtime::create(std::move(config), options));
    } else {
      owned = Runtime::create_ranks(std::move(config), options);
    }
    std::vector<Runtime*> ranks;
    for (auto& rt : owned) ranks.push_back(rt.get());
    const ModelShape& m = ranks[0]->config().model;
    if (!a.routing_file.empty() && replay.topk != m.topk)
      throw Error(fmt::format("megamoe: routing file {} has topk {}, config {} has topk {}", a.routing_file, replay.topk,
                              ranks[0]->config().name, m.topk));
    if (a.rank <= 0) print_header(*ranks[0], a);
    ModelShape logical = m;  // the model's experts (fewer than the slots with --redundant-experts)
    logical.experts = logical.experts_per_rank = logical.logical_experts;  // each expert from the seed and its id
    const Mxfp4ExpertWeights weights =
        a.world == 1 ? workload::random_weights(logical, a.seed) : workload::random_group_weights(logical, 1, a.seed);
    const Mxfp4ExpertWeights shared = m.shared_experts ? workload::random_shared_weights(m, a.seed) : Mxfp4ExpertWeights{};
    const int failures = run_sizes(args, ranks, weights, shared, a.routing_file.empty() ? nullptr : &replay);
    if (a.rank <= 0)
      fmt::print("checked: tokens compared with the references (* a random subset); worst_tok: the largest relL2 of\n"
                 "one token's row against the emulating reference; against it, each element's difference counts past\n"
                 "what h values the activations' error can round either way may move it (docs/layer.md)\n");
    return failures ? 1 : 0;
  });
}
