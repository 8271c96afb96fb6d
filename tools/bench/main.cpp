// megamoe-bench: the layer's Stage1, Stage2 and total time per batch size on one GPU, against
// the physical floor computed from the card's own ceilings measured in the same run.
//   total: median over graph replays of a captured burst of calls, each call on its own input
//          set (rotated so that the L2 holds none of them between calls), the replays of the
//          tables timed beside it (--against, --crossover) in turn with the config's;
//   stages: median over direct calls with events between the launches;
//   call: median over single calls, each waited for before the next (an isolated call's time,
//         beside the burst's).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/ceilings.hpp"
#include "bench/group_bench.hpp"
#include "common/cli.hpp"
#include "common/input_sets.hpp"
#include "common/table_choice.hpp"
#include "common/workload.hpp"
#include "common/kernel_limits.hpp"
#include "megamoe/megamoe.hpp"

using namespace megamoe;

namespace {

constexpr const char* kTool = "megamoe-bench";
constexpr const char* kDescription =
    "--world 1: times the layer of a config on GPU 0 (bs x topk routed rows over the model's experts, or "
    "--experts-per-rank's, uniform routing) and prints per batch size the Stage1, Stage2, single-call and total "
    "(burst) times, the floor max(weight bytes of the experts touched / copy bandwidth, FLOPs / fp8 rate) with "
    "both ceilings measured sustained in the same run, and time / floor. --against CONFIG also times the same "
    "model with CONFIG's bucket table (tiles, dispatch blocks, combine wire: with_buckets_of), side by side with "
    "it on the same inputs (the two totals' graph replays in turn, so that the clock's drift under the power limit "
    "falls on both), and prints both totals and their ratio (against / config: above 1, the config is faster). "
    "--crossover (Hopper path) also times the config's table with every bucket's weights mxfp4 and with every "
    "bucket's fp8_resident, side by side on the same inputs, and names the crossover: the batch size from which "
    "fp8_resident is the faster at every size measured.\n"
    "--world W > 1: the W ranks of an expert-parallel group in this process (--transport loopback: every rank on "
    "GPU 0; peer: rank r on GPU r), bs tokens a rank, uniform routing over every rank's experts: per batch size "
    "the fused and the serial call's time (the slowest rank's) and their ratio, measured side by side, and the "
    "floor (the slowest rank's, at the ceilings measured in the same run) with fused / floor; before them the "
    "latency of a flag from rank 0 to rank 1 (half a round trip; on loopback between two blocks of one GPU) and, "
    "over peer, the copy rate from GPU 0 to GPU 1.";

struct Row {
  std::int64_t bs = 0;
  int input_sets = 0, experts_touched = 0;
  double stage1_ms = 0, stage2_ms = 0, call_ms = 0, total_ms = 0, floor_ms = 0, bytes_ms = 0, flops_ms = 0;
  double against_total_ms = 0;  // --against: the other bucket table's total
  double mxfp4_total_ms = 0, resident_total_ms = 0;  // --crossover
  double separate_total_ms = 0;  // --shared-experts: the layer without them, then a dense FFN of them
};

// --shared-experts: a dense FFN of the model's shared experts (the same layer's kernels with the
// shared experts as its experts, every token routed to all of them with their weight), its bucket
// keys set so that a call takes the entry of the same rows per expert as the layer's table gives
// them.
Config dense_ffn_of_shared(const Config& c) {
  const int S = c.model.shared_experts;
  Config d = with_experts(with_shared_experts(c, 0), S);
  d.name = c.name + "_shared_ffn";
  d.model.topk = S;
  // A call of T tokens has T rows an expert; the table's entry of T rows an expert is at
  // T x keys / topk tokens.
  d.keys_experts_per_rank = std::max(1, S * c.keys_experts_per_rank / c.model.topk);
  return d;
}

// Every token of a call to each of the S shared experts, with their weight.
struct DenseRoutes {
  DeviceBuffer ids, weights;
};
DenseRoutes dense_routes(Device& dev, std::int64_t tokens, int S, float scale) {
  std::vector<int> ids(std::size_t(tokens) * S);
  std::vector<float> w(ids.size(), scale);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int(i % S);
  DenseRoutes d{DeviceBuffer(dev, ids.size() * 4), DeviceBuffer(dev, w.size() * 4)};
  dev.copy_to_device(d.ids.get(), ids.data(), ids.size() * 4);
  dev.copy_to_device(d.weights.get(), w.data(), w.size() * 4);
  return d;
}

// The config with every bucket's weights `w`, named for it.
Config with_weights(Config c, WeightSource w) {
  for (BucketConfig& b : c.buckets) b.weights = w;
  c.name += fmt::format("_{}", to_string(w));
  return c;
}

using workload::InputSet;

struct LayerTimes {
  double stage1_ms = 0, stage2_ms = 0, call_ms = 0;
};

// rt's call on every input set, captured as one graph (the caller destroys it).
GraphHandle capture_calls(Runtime& rt, const PreparedWeights& w, const std::vector<InputSet>& sets, std::int64_t bs,
                          StreamHandle stream) {
  rt.prepare(bs);
  Device& dev = rt.device();
  dev.begin_capture(stream);
  for (const InputSet& s : sets)
    rt.forward(w, s.x.get(), static_cast<const int*>(s.ids.get()), static_cast<const float*>(s.w.get()), s.y.get(), bs,
               stream);
  return dev.end_capture(stream);
}

void check_no_errors(Runtime& rt) {
  CallErrors errors = rt.take_errors();
  if (errors.any()) throw Error(fmt::format("megamoe-bench: the kernels reported {} bad ids", errors.bad_ids));
}

// The totals of several layers on the same inputs: each one's graph of a call per set, replayed
// in turn (a, b, c, a, b, c, ...) so that the clock's drift under the power limit falls on all
// alike; medians per call.
std::vector<double> interleaved_totals(Device& dev, StreamHandle stream, const std::vector<GraphHandle>& graphs,
                                       std::size_t calls, int reps) {
  EventHandle start = dev.create_event(), stop = dev.create_event();
  auto replay = [&](GraphHandle g) {
    dev.record(start, stream);
    dev.launch_graph(g, stream);
    dev.record(stop, stream);
    dev.synchronize(stream);
    return dev.elapsed_ms(start, stop);
  };
  std::vector<std::vector<float>> ms(graphs.size());
  for (int i = 0; i < 2; ++i)
    for (GraphHandle g : graphs) replay(g);
  for (int i = 0; i < reps; ++i)
    for (std::size_t k = 0; k < graphs.size(); ++k) ms[k].push_back(replay(graphs[k]));
  dev.destroy_event(start);
  dev.destroy_event(stop);
  std::vector<double> totals;
  for (auto& m : ms) totals.push_back(bench::median(std::move(m)) / calls);
  return totals;
}

// The layer of `rt` over the input sets: stages (direct calls with events between the launches)
// and single calls. The total (graph replays of a call per set) is interleaved_totals'.
LayerTimes time_layer(Runtime& rt, const PreparedWeights& w, const std::vector<InputSet>& sets, std::int64_t bs,
                      int reps, StreamHandle stream) {
  Device& dev = rt.device();
  auto call = [&](const InputSet& s) {
    rt.forward(w, s.x.get(), static_cast<const int*>(s.ids.get()), static_cast<const float*>(s.w.get()), s.y.get(), bs,
               stream);
  };
  rt.prepare(bs);
  LayerTimes t;
  rt.set_profile(true);
  std::vector<float> s1, s2;
  for (int i = 0; i < reps + 3; ++i) {
    call(sets[i % sets.size()]);
    StageTimes st = rt.last_stage_times();
    if (i >= 3) s1.push_back(st.stage1_ms), s2.push_back(st.stage2_ms);
  }
  rt.set_profile(false);
  t.stage1_ms = bench::median(s1), t.stage2_ms = bench::median(s2);
  std::size_t next = 0;
  t.call_ms = bench::median_ms(dev, stream, 3, reps, [&] { call(sets[next++ % sets.size()]); });
  check_no_errors(rt);
  return t;
}

// The options, as parsed; world 0 until --world is given.
struct Options {
  std::string config_name, json_path, against_name;
  std::string table, against_table;  // --bucket-table, --against-bucket-table: a card's bucket table
  bool crossover = false;
  KernelPath path = KernelPath::automatic;
  std::vector<std::int64_t> sizes = {1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  int world = 0, reps = 20;
  int experts_per_rank = 0;  // 0: model.experts / world
  int shared = 0;            // --shared-experts
  Transport transport = Transport::loopback;
  std::uint64_t seed = 123;
};

// A layer timed beside the config's on the same inputs (--against, --crossover): its runtime and
// its prepared weights; empty when the mode is off.
struct Beside {
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<PreparedWeights> prepared;
  explicit operator bool() const { return rt != nullptr; }
};

// --crossover: the config's table with every bucket's weights mxfp4, and with every bucket's
// fp8_resident.
struct Crossover {
  Beside mxfp4, resident;
  explicit operator bool() const { return bool(mxfp4); }
};

// --crossover's runtimes (none when it is off); the Hopper path's only.
Crossover open_crossover(bool on, const Config& config, const RuntimeOptions& options, const Runtime& rt) {
  Crossover c;
  if (on && rt.path() != KernelPath::hopper)
    throw Error("megamoe-bench: --crossover compares the Hopper path's weight sources; this GPU runs " +
                std::string(to_string(rt.path())));
  if (on) c.mxfp4.rt = Runtime::create(with_weights(config, WeightSource::mxfp4), options);
  if (on) c.resident.rt = Runtime::create(with_weights(config, WeightSource::fp8_resident), options);
  if (on) fmt::print("crossover: every bucket mxfp4 against every bucket fp8_resident, on the same inputs\n");
  return c;
}

void print_header(bool against, bool crossover, bool shared) {
  fmt::print("{:>6} {:>5} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}{}{}{}\n", "bs", "sets", "experts", "stage1_ms",
             "stage2_ms", "call_ms", "total_ms", "floor_ms", "time/floor",
             against ? fmt::format(" {:>10} {:>8}", "against_ms", "ratio") : "",
             crossover ? fmt::format(" {:>10} {:>10} {:>8}", "mxfp4_ms", "fp8res_ms", "res/mx") : "",
             shared ? fmt::format(" {:>11} {:>9}", "separate_ms", "sep/fused") : "");
}

void print_row(const Row& row, bool against, bool crossover, bool shared) {
  fmt::print("{:>6} {:>5} {:>8} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.2f}{}{}{}\n", row.bs,
             row.input_sets, row.experts_touched, row.stage1_ms, row.stage2_ms, row.call_ms, row.total_ms,
             row.floor_ms, row.total_ms / row.floor_ms,
             against ? fmt::format(" {:>10.3f} {:>8.2f}", row.against_total_ms, row.against_total_ms / row.total_ms)
                     : "",
             crossover ? fmt::format(" {:>10.3f} {:>10.3f} {:>8.2f}", row.mxfp4_total_ms, row.resident_total_ms,
                                     row.resident_total_ms / row.mxfp4_total_ms)
                       : "",
             shared ? fmt::format(" {:>11.3f} {:>9.2f}", row.separate_total_ms, row.separate_total_ms / row.total_ms)
                    : "");
  std::fflush(stdout);  // a row as soon as it is measured, also into a pipe
}

// The crossover: the first size from which fp8_resident is the faster at every size measured; printed.
std::optional<std::int64_t> report_crossover(const std::vector<Row>& rows) {
  std::optional<std::int64_t> cross;
  for (auto it = rows.rbegin(); it != rows.rend() && it->resident_total_ms < it->mxfp4_total_ms; ++it) cross = it->bs;
  if (cross)
    fmt::print("crossover: fp8_resident is the faster from bs {} on (of the sizes measured)\n", *cross);
  else
    fmt::print("crossover: none: mxfp4 is the faster at the largest size measured\n");
  return cross;
}

void write_json(const std::string& json_path, const Runtime& rt, Device& dev, const bench::Ceilings& ceilings,
                const std::vector<Row>& rows, const Beside& other, const Crossover& crossover,
                const std::optional<std::int64_t>& cross, bool shared) {
  const Config& cfg = rt.config();
  const bench::Ceiling &copy = ceilings.copy, &fp8 = ceilings.fp8;
  nlohmann::json j = {{"config", cfg.name}, {"device", dev.name()}, {"arch", dev.arch()},
                      {"path", std::string(to_string(rt.path()))}, {"world", 1},
                      {"bucket_table", table_name(cfg.table)},
                      {"copy_tb_per_s", copy.value}, {"copy_burst_tb_per_s", copy.burst},
                      {"copy_how", copy.how}, {"fp8_tflop_per_s", ceilings.tflops},
                      {"fp8_burst_tflop_per_s", fp8.burst}, {"fp8_measured", fp8.measured},
                      {"fp8_how", fp8.how}};
  for (const Row& r : rows)
    j["buckets"].push_back({{"bs", r.bs}, {"input_sets", r.input_sets}, {"experts_touched", r.experts_touched},
                            {"stage1_ms", r.stage1_ms}, {"stage2_ms", r.stage2_ms}, {"call_ms", r.call_ms},
                            {"total_ms", r.total_ms},
                            {"floor_ms", r.floor_ms}, {"floor_bytes_ms", r.bytes_ms},
                            {"floor_flops_ms", r.flops_ms}, {"time_over_floor", r.total_ms / r.floor_ms}});
  if (other) {
    j["against"] = other.rt->config().name;
    for (std::size_t i = 0; i < rows.size(); ++i)
      j["buckets"][i]["against_total_ms"] = rows[i].against_total_ms,
      j["buckets"][i]["against_over_config"] = rows[i].against_total_ms / rows[i].total_ms;
  }
  if (crossover) {
    j["crossover_bs"] = cross ? nlohmann::json(*cross) : nlohmann::json(nullptr);
    j["fp8_resident_bytes"] = crossover.resident.prepared->resident_bytes;
    for (std::size_t i = 0; i < rows.size(); ++i)
      j["buckets"][i]["mxfp4_total_ms"] = rows[i].mxfp4_total_ms,
      j["buckets"][i]["fp8_resident_total_ms"] = rows[i].resident_total_ms;
  }
  if (shared) {
    j["shared_experts"] = cfg.model.shared_experts;
    for (std::size_t i = 0; i < rows.size(); ++i)
      j["buckets"][i]["separate_total_ms"] = rows[i].separate_total_ms,
      j["buckets"][i]["separate_over_fused"] = rows[i].separate_total_ms / rows[i].total_ms;
  }
  std::ofstream(json_path) << j.dump(2) << "\n";
}

void print_footnotes(int reps, bool against, bool crossover, bool shared) {
  fmt::print("stages: median of {} direct calls; call: median of {} single calls, each waited for; total: median "
             "of {} graph replays over the input sets (each layer's replays in turn with the others' timed beside it){}\n",
             reps, reps, reps, against ? "; against: the other bucket table's total, ratio: against / total" : "");
  if (crossover)
    fmt::print("mxfp4_ms, fp8res_ms: totals with every bucket's weights so; res/mx: their ratio (below 1, "
               "fp8_resident is the faster)\n");
  if (shared)
    fmt::print("total_ms: the layer with its shared experts in the call; separate_ms: the layer without them, then "
               "a dense FFN of them (their sum not timed); sep/fused: their ratio (above 1, the fused call is "
               "faster); experts and floor_ms count the shared experts\n");
}

// --world 1: the table per batch size, with --against's and --crossover's columns measured in
// the same size's turn, on its inputs.
int run_world1(const Options& o) {
  RuntimeOptions options;
  options.max_tokens = int(*std::max_element(o.sizes.begin(), o.sizes.end()));
  options.path = o.path;
  // The configs, and --against's table on the model, checked before any GPU is opened.
  const Config base = workload::load_for_world(o.config_name, 1, o.experts_per_rank);
  std::optional<Config> against_base;
  if (!o.against_name.empty()) {
    against_base = load_config(o.against_name);
    with_buckets_of(base, *against_base);  // refuses a table the model cannot take
  }
  // The table this GPU takes (or --bucket-table's), picked before --crossover edits its weight sources.
  const std::string card = workload::gpu_card(BackendKind::cuda, 0);
  const workload::ToolTable table = workload::pick_table(base, o.table, card);
  options.bucket_table = table.option;
  const Config& loaded = table.config;
  const Config config = o.shared ? with_shared_experts(loaded, o.shared) : loaded;
  // --against: the same model with another config's bucket table (its table for this GPU, or --against-bucket-table's).
  std::optional<workload::ToolTable> against;
  if (against_base) {
    against = workload::pick_table(*against_base, o.against_table, card);
    against->config = with_buckets_of(config, against->config);
  }
  auto rt = Runtime::create(config, options);
  Beside other;
  if (against) {
    RuntimeOptions against_options = options;
    against_options.bucket_table = against->option;
    other.rt = Runtime::create(against->config, against_options);
  }
  Device& dev = rt->device();
  const Config& cfg = rt->config();
  const ModelShape& m = cfg.model;
  fmt::print("config {} on {} ({}), {} path, world 1\n", cfg.name, dev.name(), dev.arch(), to_string(rt->path()));
  fmt::print("{}\n", table.line);
  if (other) fmt::print("against: {} (side by side on the same inputs); its {}\n", other.rt->config().name, against->line);
  Crossover crossover = open_crossover(o.crossover, config, options, *rt);
  const int S = config.model.shared_experts;
  Beside plain, dense;  // --shared-experts: the layer without them, and their dense FFN
  if (o.shared) {
    plain.rt = Runtime::create(with_shared_experts(loaded, 0), options);
    dense.rt = Runtime::create(dense_ffn_of_shared(config), options);
    fmt::print("shared experts: {} in the call, against {} then {} (side by side on the same inputs)\n", S,
               plain.rt->config().name, dense.rt->config().name);
  }

  const bench::Ceilings ceilings = bench::measure_and_print_ceilings(dev);

  Mxfp4ExpertWeights weights = workload::random_weights(m, o.seed);
  const Mxfp4ExpertWeights shared = S ? workload::random_shared_weights(m, o.seed) : Mxfp4ExpertWeights{};
  if (o.shared) plain.prepared = plain.rt->prepare_weights(weights), dense.prepared = dense.rt->prepare_weights(shared);
  auto prepared = rt->prepare_weights(S ? append_experts(weights, shared) : weights);
  if (other) other.prepared = other.rt->prepare_weights(weights);
  if (crossover) crossover.mxfp4.prepared = crossover.mxfp4.rt->prepare_weights(weights);
  if (crossover) crossover.resident.prepared = crossover.resident.rt->prepare_weights(weights);
  if (crossover) fmt::print("fp8-resident copy: {:.2f} GB\n", crossover.resident.prepared->resident_bytes / 1e9);
  StreamHandle stream = dev.create_stream();
  std::vector<Row> rows;
  print_header(bool(other), bool(crossover), bool(o.shared));
  for (std::int64_t bs : o.sizes) {
    Row row;
    row.bs = bs;
    const workload::InputSets inputs = workload::make_input_sets(dev, m, bs, o.seed);
    const std::vector<InputSet>& sets = inputs.sets;
    row.input_sets = int(sets.size()), row.experts_touched = inputs.experts_touched + S;  // shared: every token's
    const bench::Floor floor =
        bench::layer_floor(m, row.experts_touched, inputs.pairs + bs * S, ceilings.tbps, ceilings.tflops);
    row.bytes_ms = floor.bytes_ms, row.flops_ms = floor.flops_ms, row.floor_ms = floor.ms;
    const LayerTimes t = time_layer(*rt, *prepared, sets, bs, o.reps, stream);
    row.stage1_ms = t.stage1_ms, row.stage2_ms = t.stage2_ms, row.call_ms = t.call_ms;
    // The totals: the config's and those beside it, replayed in turn.
    std::vector<std::pair<Runtime*, const PreparedWeights*>> layers = {{rt.get(), prepared.get()}};
    for (const Beside* b : {&other, &crossover.mxfp4, &crossover.resident})
      if (*b) layers.push_back({b->rt.get(), b->prepared.get()});
    std::vector<GraphHandle> graphs;
    for (auto [r, w] : layers) graphs.push_back(capture_calls(*r, *w, sets, bs, stream));
    DenseRoutes routes;
    DeviceBuffer dense_y;
    if (o.shared) {  // per set: the layer without them, then the dense FFN on the same x
      routes = dense_routes(dev, bs, S, config.model.shared_expert_scale);
      dense_y = DeviceBuffer(dev, std::size_t(bs) * m.model_dim * 2);
      plain.rt->prepare(bs), dense.rt->prepare(bs);
      dev.begin_capture(stream);
      for (const InputSet& s : sets) {
        plain.rt->forward(*plain.prepared, s.x.get(), static_cast<const int*>(s.ids.get()),
                          static_cast<const float*>(s.w.get()), s.y.get(), bs, stream);
        dense.rt->forward(*dense.prepared, s.x.get(), static_cast<const int*>(routes.ids.get()),
                          static_cast<const float*>(routes.weights.get()), dense_y.get(), bs, stream);
      }
      graphs.push_back(dev.end_capture(stream));
      layers.push_back({plain.rt.get(), plain.prepared.get()});
      layers.push_back({dense.rt.get(), dense.prepared.get()});
    }
    const std::vector<double> totals = interleaved_totals(dev, stream, graphs, sets.size(), o.reps);
    for (GraphHandle g : graphs) dev.destroy_graph(g);
    for (auto [r, w] : layers) check_no_errors(*r);
    std::size_t next = 0;
    row.total_ms = totals[next++];
    if (other) row.against_total_ms = totals[next++];
    if (crossover) row.mxfp4_total_ms = totals[next++], row.resident_total_ms = totals[next++];
    if (o.shared) row.separate_total_ms = totals[next++];
    print_row(row, bool(other), bool(crossover), bool(o.shared));
    rows.push_back(row);
  }
  dev.destroy_stream(stream);
  std::optional<std::int64_t> cross;
  if (crossover) cross = report_crossover(rows);
  if (!o.json_path.empty()) write_json(o.json_path, *rt, dev, ceilings, rows, other, crossover, cross, bool(o.shared));
  print_footnotes(o.reps, bool(other), bool(crossover), bool(o.shared));
  return 0;
}

void add_flags(CLI::App& app, Options& o) {
  app.add_option("--world", o.world, "1: the layer on GPU 0; more: the ranks of a group in this process")
      ->type_name("W")->required()->check(cli::in_range(1, kMaxWorld));
  cli::add_config(app, o.config_name)->required();
  cli::add_int_list(app, "--bs", o.sizes, "comma-separated token counts", 1);
  cli::add_path(app, o.path);
  app.add_option("--reps", o.reps, "timed repetitions per measurement; medians are reported")
      ->type_name("N")->check(cli::at_least(3));
  app.add_option("--seed", o.seed, "weights, routing and input seed; a size's inputs come from it and the size alone")
      ->type_name("S")->check(cli::at_least(0, "an integer"));
  app.add_option("--json", o.json_path, "also write the results as JSON")->type_name("FILE");
  app.add_option("--against", o.against_name, "(--world 1) the same model with CONFIG's bucket table, side by side")
      ->type_name("CONFIG");
  cli::add_bucket_table(app, o.table,
                        "the table tuned on this GPU's card, else the config's default (the header says which)");
  app.add_option("--against-bucket-table", o.against_table,
                 "(--against) CONFIG's bucket table tuned on CARD, or \"default\"; without it, CONFIG's table for "
                 "this GPU as --bucket-table's rule picks it (one config against itself: --against NAME "
                 "--against-bucket-table CARD times this card's table beside another card's)")
      ->type_name("CARD");
  app.add_flag("--crossover", o.crossover, "(--world 1, Hopper path) the table with mxfp4 and with fp8_resident weights");
  cli::add_experts_per_rank(app, o.experts_per_rank, 1);
  app.add_option("--shared-experts", o.shared,
                 "(--world 1) the model with N shared experts in the call (the table's times and floor), against "
                 "the same layer without them followed by a separate dense FFN of the N shared experts (the same "
                 "kernels, every token to all N, tiles of the same rows per expert) on the same stream, side by "
                 "side on the same inputs: separate_ms and separate / fused (above 1, the fused call is faster). "
                 "The separate path's sum of its two outputs is not timed.")
      ->type_name("N")->check(cli::at_least(1));
  app.add_option_function<std::string>(
         "--transport", [&o](const std::string& t) { o.transport = transport_from_name(t); },
         "--world W > 1: loopback (every rank on GPU 0) or peer (rank r on GPU r)")
      ->type_name("T")->check(cli::one_of({"loopback", "peer"}));
}

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // loopback ranks' streams on queues of their own (docs/ep.md)
  Options o;
  CLI::App app;
  cli::describe(app, kTool, kDescription, "Exit status: 0 on success, 1 on error, 2 on bad usage, 3 when no GPU is present.");
  add_flags(app, o);
  cli::parse(app, argc, argv);
  if (!o.against_name.empty() && o.world != 1) cli::usage_error(kTool, "--against is for --world 1");
  if (!o.against_table.empty() && o.against_name.empty())
    cli::usage_error(kTool, "--against-bucket-table needs --against");
  if (o.crossover && o.world != 1) cli::usage_error(kTool, "--crossover is for --world 1");
  if (o.shared && o.world != 1) cli::usage_error(kTool, "--shared-experts is for --world 1");
  if (o.sizes.empty()) cli::usage_error(kTool, "--bs needs sizes of at least 1");

  return cli::run_reporting_errors([&] {
    if (o.world > 1)
      return bench::run_group_bench(
          {workload::load_for_world(o.config_name, o.world, o.experts_per_rank), o.json_path, o.table, o.path,
           o.transport, o.world, o.reps, o.seed, o.sizes});
    return run_world1(o);
  });
}
