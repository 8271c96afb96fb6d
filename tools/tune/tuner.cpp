#include "tune/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "codegen/layer_kernels.hpp"
#include "common/table_choice.hpp"
#include "common/workload.hpp"
#include "common/diagnostics.hpp"
#include "jit/precompile.hpp"
#include "megamoe/megamoe.hpp"
#include "common/kernel_limits.hpp"
#include "tune/group_timer.hpp"
#include "tune/pair_timer.hpp"
#include "weights/prepare_weights.hpp"
#include "config/config_json.hpp"
#include "tune/tactic_labels.hpp"
#include "tune/tune_journal.hpp"

namespace megamoe::tune {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int bucket_index(int bucket) { return int(std::log2(bucket)); }

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string today() {
  std::time_t t = std::time(nullptr);
  char s[16];
  std::strftime(s, sizeof s, "%Y-%m-%d", std::gmtime(&t));
  return s;
}

// Warnings (a path's padding note, said by every runtime the search creates) once each.
class WarnOnce {
 public:
  explicit WarnOnce(const std::function<void(const std::string&)>& print)
      : old_(set_warning_handler([this, print](const std::string& m) {
          if (seen_.insert(m).second) print("warning: " + m);
        })) {}
  ~WarnOnce() { set_warning_handler(old_); }

 private:
  std::set<std::string> seen_;
  WarningHandler old_;
};

// What the search times with: the model cut to the experts a rank holds where the table's keys
// count tokens (a call of `bucket` tokens then takes that bucket), its weights (with the
// fp8-resident copy where the space or the starting table reads it), and runtimes of one bucket
// entry each.
class Bench {
 public:
  Bench(const Config& per_rank, const SpaceOptions& space, int max_tokens, std::uint64_t seed) : per_rank_(per_rank) {
    bool resident = space.fp8_resident;
    for (const BucketConfig& b : per_rank.buckets) resident |= b.weights == WeightSource::fp8_resident;
    Config weights_config = per_rank;
    for (BucketConfig& b : weights_config.buckets)
      b = with_weights(per_rank, b, resident ? WeightSource::fp8_resident : WeightSource::mxfp4);
    RuntimeOptions o;
    o.max_tokens = max_tokens;
    o.path = KernelPath::hopper;
    owner_ = Runtime::create(weights_config, o);
    weights_ = owner_->prepare_weights(
        workload::with_shared_weights(workload::random_weights(per_rank.model, seed), per_rank.model, seed));
  }
  Device& device() { return owner_->device(); }
  const Config& per_rank() const { return per_rank_; }
  const PreparedWeights& weights() const { return *weights_; }

  // A runtime whose table is `table` with `entry` at its bucket, for calls of up to `tokens`.
  std::unique_ptr<Runtime> runtime(const Config& table, const BucketConfig& entry, std::int64_t tokens) const {
    Config c = table;
    c.buckets[bucket_index(entry.bucket)] = entry;
    RuntimeOptions o;
    o.max_tokens = int(tokens);
    o.path = KernelPath::hopper;
    return Runtime::create(c, o);
  }

 private:
  Config per_rank_;
  std::unique_ptr<Runtime> owner_;
  std::unique_ptr<PreparedWeights> weights_;
};

// A runtime and its calls captured: the side a pair is timed against.
struct Side {
  BucketConfig entry;
  std::unique_ptr<Runtime> rt;
  CapturedCalls calls;
};

class Search {
 public:
  Search(const TuneOptions& o, const Config& per_rank, Bench& bench, TuneJournal& journal, Clock::time_point t0)
      : o_(o), per_rank_(per_rank), bench_(bench), journal_(journal), t0_(t0) {}

  bool out_of_time() const { return o_.minutes > 0 && seconds_since(t0_) > o_.minutes * 60; }

  Side side(PairTimer& timer, const BucketConfig& e) {
    Side s{e, bench_.runtime(per_rank_, e, timer.tokens()), {}};
    s.calls = timer.capture(*s.rt, bench_.weights());
    return s;
  }

  // `candidate` against `incumbent` at the timer's bucket: from the journal, or timed and recorded.
  PairTimes pair(PairTimer& timer, const Side& incumbent, const BucketConfig& candidate) {
    const int bucket = candidate.bucket;
    const std::string a = entry_text(incumbent.entry), b = entry_text(candidate);
    if (auto t = journal_.pair(bucket, a, b)) return *t;
    Side c = side(timer, candidate);
    const PairTimes t = timer.time_pair(incumbent.calls, c.calls, o_.pairs);
    journal_.add_pair(bucket, a, b, t);
    return t;
  }

 private:
  const TuneOptions& o_;
  const Config& per_rank_;
  Bench& bench_;
  TuneJournal& journal_;
  Clock::time_point t0_;
};

// Builds every kernel that `entries` launch (one job per distinct key) on every core, with a
// line of progress; returns how many were compiled (not found in the cache) and the seconds.
std::pair<int, double> compile_ahead(const Config& per_rank, const std::vector<BucketConfig>& entries,
                                     const std::string& arch, int threads, const std::string& what,
                                     const std::function<void(const std::string&)>& print, int world = 1) {
  const auto t0 = Clock::now();
  KernelBuilder& builder = shared_kernel_builder(BackendKind::cuda, arch);
  std::vector<PrecompileJob> jobs;
  std::set<std::string> keys;
  for (const BucketConfig& e : entries)
    for (const KernelSpec& spec : kernels_for_bucket(per_rank, e, KernelPath::hopper, world)) {
      PlannedKernel p = builder.plan(spec);
      if (keys.insert(p.key.hex).second) jobs.push_back({std::move(p), {e.bucket}, {}, {}});
    }
  int compiled = 0;
  double said = 0;  // a line at most every 5 s, and the last
  run_precompile(builder, jobs, threads, [&](const PrecompileJob& j, std::size_t done, std::size_t total) {
    compiled += j.error.empty() && j.report.origin == BuildOrigin::compiled;
    if (const double s = seconds_since(t0); s - said >= 5 || done == total)
      said = s, print(fmt::format("compile ({}): {}/{} kernels, {} compiled (the rest in the cache), {:.0f} s", what,
                                  done, total, compiled, s));
  });
  for (const PrecompileJob& j : jobs)
    if (!j.error.empty())
      throw Error(fmt::format("megamoe-tune: kernel {} failed to compile: {}", j.planned.rendered.name, j.error));
  return {compiled, seconds_since(t0)};
}

// Phase 4's part: the dispatch knobs of each bucket listed, timed on `world` ranks of this process.
class DispatchSearch {
 public:
  DispatchSearch(const TuneOptions& o, const Config& model, TuneJournal& journal, Clock::time_point t0,
                 const std::function<void(const std::string&)>& print)
      : o_(o), model_(model), journal_(journal), t0_(t0), print_(print),
        group_(fmt::format("world {} ({})", o.world, to_string(o.transport))),
        key_prefix_(fmt::format("world {} {}: ", o.world, to_string(o.transport))) {}

  // Searches `tuned`'s entries at `buckets` in place; the rows go to res.
  void run(Config& tuned, const std::vector<int>& buckets, const std::string& arch, TuneResult& res) {
    Config table = model_;
    table.buckets = tuned.buckets;
    std::vector<std::pair<int, std::int64_t>> plan;  // bucket, tokens a rank
    for (int b : buckets) {
      if (const std::int64_t t = tokens_at_world(table, o_.world, b)) {
        plan.push_back({b, t});
        continue;
      }
      DispatchReport r;
      r.bucket = b, r.start = r.tuned = dispatch_label(tuned.buckets[bucket_index(b)]);
      r.note = fmt::format("not searched: no call of 1 to {} tokens a rank at {} takes this key", kMaxBucket, group_);
      print_(fmt::format("dispatch bucket {:>5}: {}", b, r.note));
      res.dispatch_rows.push_back(r);
    }
    if (plan.empty()) return;
    std::int64_t max_tokens = 0;
    std::vector<BucketConfig> loaded;  // a group for calls up to max_tokens loads every key up to the largest
    for (auto [b, t] : plan) max_tokens = std::max(max_tokens, t);
    for (const BucketConfig& e : table.buckets)
      if (e.bucket <= plan.back().first) loaded.push_back(e);
    auto [n, s] = compile_ahead(table, loaded, arch, o_.threads, group_, print_, o_.world);
    res.kernels_compiled += n, res.compile_seconds += s;

    // The weights once, on each rank's device; every group of the search reads them.
    const Config resolved = config_for_world(table, o_.world);
    const int per_rank = resolved.model.experts_per_rank;
    std::vector<std::unique_ptr<Device>> opened;
    std::vector<Device*> devices;
    for (int r = 0; r < o_.world; ++r) {
      if (o_.transport != Transport::loopback || r == 0) opened.push_back(open_device(BackendKind::cuda, r));
      devices.push_back(opened.back().get());
    }
    RankWeights weights;
    {
      const Mxfp4ExpertWeights all = workload::random_group_weights(resolved.model, o_.world, o_.seed);
      for (int r = 0; r < o_.world; ++r)
        weights.push_back(prepare_weights(
            *devices[r], resolved, KernelPath::hopper, int(max_tokens),
            workload::with_shared_weights(workload::slice_experts(all, r * per_rank, per_rank), resolved.model, o_.seed)));
    }
    print_(fmt::format("dispatch: {} ranks of {} experts each, {}{}", o_.world, per_rank, group_,
                       o_.transport == Transport::loopback
                           ? "; the ranks share GPU 0, each on its share of the SMs: the knobs are tuned for that, "
                             "not for ranks on GPUs of their own (--transport peer)"
                           : ""));
    bool warmed = false;
    for (auto [b, tokens] : plan) {
      BucketConfig& slot = tuned.buckets[bucket_index(b)];
      table.buckets = tuned.buckets;
      if (auto done = journal_.dispatch_bucket(b)) {
        slot = entry_from_text(table, b, done->entry);
        res.dispatch_rows.push_back(report_from_json(done->report));
        print_(fmt::format("dispatch bucket {:>5}: {} (resumed from the journal)", b, dispatch_label(slot)));
        continue;
      }
      DispatchReport r;
      r.bucket = b, r.tokens = tokens, r.start = dispatch_label(slot);
      if (out_of_time()) {
        res.cut_short = true;
        r.tuned = r.start, r.note = "not searched: the --minutes bound was reached";
        print_(fmt::format("dispatch bucket {:>5}: {} ({})", b, r.tuned, r.note));
        res.dispatch_rows.push_back(r);
        continue;
      }
      search_bucket(table, slot, devices, weights, r, res, warmed);
      warmed = true;
      res.dispatch_rows.push_back(r);
    }
  }

 private:
  struct GroupSide {
    BucketConfig entry;
    Ranks ranks;
    GroupCalls calls;  // destroyed before the ranks its graphs launch into
  };

  bool out_of_time() const { return o_.minutes > 0 && seconds_since(t0_) > o_.minutes * 60; }

  // A group whose table is `table` with `entry` at its bucket, for calls of `tokens` tokens a rank;
  // each rank holds twice the mean rows of uniform routing (at least 4096, at most the worst case)
  // rather than the worst case, so that two groups fit beside the weights.
  Ranks group(Config table, const BucketConfig& entry, std::int64_t tokens) const {
    table.buckets[bucket_index(entry.bucket)] = entry;
    RuntimeOptions r;
    r.world = o_.world, r.transport = o_.transport, r.max_tokens = int(tokens), r.path = KernelPath::hopper;
    const long long worst = (long long)o_.world * tokens * table.model.topk;
    r.routed_rows_capacity = std::min(worst, std::max(2LL * tokens * table.model.topk, 4096LL));
    return Runtime::create_ranks(table, r);
  }

  void search_bucket(const Config& table, BucketConfig& slot, const std::vector<Device*>& devices,
                     const RankWeights& weights, DispatchReport& r, TuneResult& res, bool warmed) {
    const auto tb = Clock::now();
    GroupTimer timer(devices, config_for_world(table, o_.world).model, r.tokens, o_.seed);
    auto side = [&](const BucketConfig& e) {
      GroupSide s{e, group(table, e, r.tokens), {}};
      s.calls = timer.capture(s.ranks, weights);
      return s;
    };
    auto pair = [&](const GroupSide& inc, const BucketConfig& c) {
      const std::string a = key_prefix_ + entry_text(inc.entry), b = key_prefix_ + entry_text(c);
      if (auto t = journal_.pair(r.bucket, a, b)) return *t;
      GroupSide cand = side(c);
      const PairTimes t = timer.time_pair(inc.calls, cand.calls, o_.pairs);
      journal_.add_pair(r.bucket, a, b, t);
      return t;
    };
    GroupSide inc = side(slot);
    timer.warm(inc.calls, warmed ? 0.3 : 3);  // the card idled while the weights were made
    const BucketConfig first = slot;
    std::vector<std::pair<BucketConfig, double>> timed;
    bool cut = false;
    for (Knob k : {Knob::dispatch_blocks, Knob::dispatch_persistent, Knob::dispatch_stride}) {
      std::optional<BucketConfig> best;
      double best_ratio = 1 - o_.min_gain;
      for (const BucketConfig& c : candidates(table, inc.entry, k, o_.space)) {
        if ((cut = out_of_time())) break;
        const PairTimes t = pair(inc, c);
        ++r.timed;
        timed.push_back({c, t.candidate_ms});
        if (t.ratio < best_ratio) best = c, best_ratio = t.ratio;
      }
      if (best) {
        inc.calls = GroupCalls();
        inc = side(*best);
      }
      if (cut) break;
    }
    slot = inc.entry;
    r.tuned = dispatch_label(slot);
    if (entry_text(first) == entry_text(slot)) {
      r.start_ms = r.tuned_ms = timer.time_pair(inc.calls, inc.calls, o_.pairs).incumbent_ms;
    } else {
      const PairTimes t = pair(inc, first);
      r.tuned_ms = t.incumbent_ms, r.start_ms = t.candidate_ms;
    }
    for (const auto& [e, ms] : timed)
      if (entry_text(e) != entry_text(slot) && (r.runner_up_ms == 0 || ms < r.runner_up_ms))
        r.runner_up_ms = ms, r.runner_up = dispatch_label(e);
    res.cut_short |= cut;
    if (cut) r.note = "searched in part: the --minutes bound was reached (a later run with the journal goes on)";
    else journal_.add_dispatch_bucket(r.bucket, {entry_text(slot), report_json(r)});
    print_(fmt::format("dispatch bucket {:>5} ({} tokens a rank): {}: {:.4f} ms, the start's {} {:.4f} ms ({:.3f}x); "
                       "{} timed, {:.1f} s",
                       r.bucket, r.tokens, r.tuned, r.tuned_ms, r.start, r.start_ms, r.start_ms / r.tuned_ms, r.timed,
                       seconds_since(tb)));
  }

  static json report_json(const DispatchReport& r) {
    return {{"bucket", r.bucket},     {"tokens", r.tokens},     {"start", r.start},
            {"tuned", r.tuned},       {"runner_up", r.runner_up}, {"start_ms", r.start_ms},
            {"tuned_ms", r.tuned_ms}, {"runner_up_ms", r.runner_up_ms}, {"timed", r.timed}};
  }
  static DispatchReport report_from_json(const json& j) {
    DispatchReport r;
    r.bucket = j.at("bucket"), r.tokens = j.at("tokens");
    r.start = j.at("start"), r.tuned = j.at("tuned"), r.runner_up = j.at("runner_up");
    r.start_ms = j.at("start_ms"), r.tuned_ms = j.at("tuned_ms"), r.runner_up_ms = j.at("runner_up_ms");
    r.timed = j.at("timed");
    r.note = "resumed from the journal";
    return r;
  }

  const TuneOptions& o_;
  const Config& model_;
  TuneJournal& journal_;
  Clock::time_point t0_;
  const std::function<void(const std::string&)>& print_;
  const std::string group_, key_prefix_;
};

double geometric_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 1 : std::exp(s / v.size());
}

std::string fmt_ms(double ms) { return ms > 0 ? fmt::format("{:.4f}", ms) : "-"; }

json report_json(const BucketReport& r) {
  return {{"bucket", r.bucket},           {"rows_per_expert", r.rows_per_expert}, {"start", r.start_tactic},
          {"tuned", r.tuned_tactic},      {"runner_up", r.runner_up_tactic},      {"start_ms", r.start_ms},
          {"tuned_ms", r.tuned_ms},       {"runner_up_ms", r.runner_up_ms},       {"timed", r.timed},
          {"pruned", r.pruned}};
}

BucketReport report_from_json(const json& j) {
  BucketReport r;
  r.bucket = j.at("bucket"), r.rows_per_expert = j.at("rows_per_expert");
  r.start_tactic = j.at("start"), r.tuned_tactic = j.at("tuned"), r.runner_up_tactic = j.at("runner_up");
  r.start_ms = j.at("start_ms"), r.tuned_ms = j.at("tuned_ms"), r.runner_up_ms = j.at("runner_up_ms");
  r.timed = j.at("timed"), r.pruned = j.at("pruned");
  r.note = "resumed from the journal";
  return r;
}

std::string report_text(const TuneResult& res, const std::string& model, const std::string& start,
                        const std::string& device, int world, Transport transport) {
  std::string s = fmt::format(
      "megamoe-tune report: {} from {}'s table on {}, {} (modes: {})\n"
      "start_ms and tuned_ms: per call, median of interleaved graph replays side by side; start/tuned above 1: the "
      "tuned entry is faster; runner-up: the best other tactic timed, /tuned its time in its own pair over tuned_ms\n",
      model, start, device, today(), to_string(res.modes));
  s += fmt::format("{:>6} {:>8} {:>10} {:>10} {:>12}  {:<60} {:<60} {:>9} {:>6} {:>6}\n", "bucket", "rows/exp",
                   "start_ms", "tuned_ms", "start/tuned", "tuned", "runner-up", "r-up/tun", "timed", "pruned");
  for (const BucketReport& r : res.rows)
    s += fmt::format("{:>6} {:>8.1f} {:>10} {:>10} {:>12} {:<60} {:<60} {:>9} {:>6} {:>6}{}\n", r.bucket,
                     r.rows_per_expert, fmt_ms(r.start_ms), fmt_ms(r.tuned_ms),
                     r.tuned_ms > 0 ? fmt::format("{:.3f}", r.start_ms / r.tuned_ms) : "-", r.tuned_tactic,
                     r.runner_up_tactic.empty() ? "-" : r.runner_up_tactic,
                     r.runner_up_ms > 0 && r.tuned_ms > 0 ? fmt::format("{:.3f}", r.runner_up_ms / r.tuned_ms) : "-",
                     r.timed, r.pruned, r.note.empty() ? "" : "  (" + r.note + ")");
  if (!res.dispatch_rows.empty()) {
    s += fmt::format("dispatch over {} ranks ({}): per call, the slowest rank's time; tokens: a rank's in the calls "
                     "timed\n",
                     world, to_string(transport));
    s += fmt::format("{:>6} {:>7} {:>10} {:>10} {:>12}  {:<34} {:<34} {:<34} {:>6}\n", "bucket", "tokens", "start_ms",
                     "tuned_ms", "start/tuned", "start", "tuned", "runner-up", "timed");
    for (const DispatchReport& r : res.dispatch_rows)
      s += fmt::format("{:>6} {:>7} {:>10} {:>10} {:>12}  {:<34} {:<34} {:<34} {:>6}{}\n", r.bucket, r.tokens,
                       fmt_ms(r.start_ms), fmt_ms(r.tuned_ms),
                       r.tuned_ms > 0 ? fmt::format("{:.3f}", r.start_ms / r.tuned_ms) : "-", r.start, r.tuned,
                       r.runner_up.empty() ? "-" : r.runner_up, r.timed, r.note.empty() ? "" : "  (" + r.note + ")");
  }
  s += fmt::format("{:.0f} s in all, {:.0f} s of it compiling {} kernels{}\n", res.seconds, res.compile_seconds,
                   res.kernels_compiled, res.cut_short ? "; the --minutes bound cut the search short" : "");
  return s;
}

// The modes phase's entries: each mode candidate (and wire) at every bucket listed.
std::vector<BucketConfig> mode_phase_entries(const Config& per_rank, const Config& start, const std::vector<int>& buckets,
                                             const Modes& start_modes, const SpaceOptions& space) {
  std::vector<BucketConfig> entries;
  for (const Modes& m : mode_candidates(per_rank, start_modes, space))
    for (const Modes& w : wire_candidates(m, space))
      for (int b : buckets) entries.push_back(with_modes(per_rank, start.buckets[bucket_index(b)], w));
  return entries;
}

// The tiles phase's entries under `modes`: each bucket's entry from either weight source, and
// every Stage1 and Stage2 candidate of each.
std::vector<BucketConfig> tile_phase_entries(const Config& per_rank, const Config& start, const std::vector<int>& buckets,
                                             const Modes& modes, const SpaceOptions& space) {
  std::vector<BucketConfig> entries;
  for (int b : buckets) {
    const BucketConfig e0 = with_modes(per_rank, start.buckets[bucket_index(b)], modes);
    entries.push_back(start.buckets[bucket_index(b)]);  // the start's own, timed beside the tuned one
    for (WeightSource w : {WeightSource::mxfp4, WeightSource::fp8_resident}) {
      if (w != e0.weights && !space.fp8_resident) continue;  // the weights knob is off: the start's source only
      const BucketConfig e = with_weights(per_rank, e0, w);
      entries.push_back(e);
      for (Knob k : {Knob::stage1, Knob::stage2})
        for (const BucketConfig& c : candidates(per_rank, e, k, space)) entries.push_back(c);
    }
  }
  return entries;
}

// A search's fixed facts, settled before any GPU is touched: the options checked, the model,
// the starting table, the buckets, and what is timed (the model at the table's keys).
struct Plan {
  const TuneOptions& o;
  std::function<void(const std::string&)> print;
  std::string name, start_name;
  std::string card;        // the GPU's name ("" with --compile-only)
  std::string table_line;  // which of the model's tables the search starts from, and why
  Config loaded;           // the model's config with every table it holds (the tuned one joins them)
  Config model, start, per_rank;
  std::vector<int> buckets;
  Modes start_modes;
  bool search_modes = false;  // x and h, and the wire
  Clock::time_point t0;

  const BucketConfig& entry_at(int b) const { return start.buckets[bucket_index(b)]; }
};

void check_options(const TuneOptions& o) {
  if (o.pairs < 3) throw Error(fmt::format("megamoe-tune: pairs = {}, expected at least 3", o.pairs));
  if (!(o.min_gain >= 0 && o.min_gain < 0.5))
    throw Error(fmt::format("megamoe-tune: min_gain = {}, expected 0 to 0.5", o.min_gain));
  if (o.world < 1 || o.world > kMaxWorld)
    throw Error(fmt::format("megamoe-tune: world = {}, expected 1..{}", o.world, int(kMaxWorld)));
  if (o.world > 1 && o.transport == Transport::ipc)
    throw Error("megamoe-tune: transport ipc: the search runs the group's ranks in its own process (loopback or peer)");
}

// The starting table on the model, keyed as the model keys its table (--from: another config's,
// the knobs not searched the model's own).
void take_start(Plan& p) {
  p.start = p.model;
  p.start_name = p.model.name;
  if (!p.o.start.empty()) {
    Config other = load_config(p.o.start);
    other = with_chosen_table(other, choose_table(other, p.card, p.o.table));  // as the model's table is chosen
    p.start.buckets = with_buckets_of(p.model, other).buckets;  // refuses a table the model cannot take
    p.start_name = other.name;
    for (int i = 0; i < kBucketCount; ++i)
      p.start.buckets[i].dispatch = p.model.buckets[i].dispatch,
      p.start.buckets[i].bounds_check = p.model.buckets[i].bounds_check;
  }
  for (const BucketConfig& b : p.start.buckets)
    if (!allowed(p.start, b))
      throw Error(fmt::format("megamoe-tune: the starting table's bucket {} breaks the shape contract for {}", b.bucket,
                              p.model.name));
}

std::vector<int> bucket_list(const std::vector<int>& asked) {
  std::vector<int> buckets = asked;
  if (buckets.empty())
    for (int b = 1; b <= 8192; b *= 2) buckets.push_back(b);
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  for (int b : buckets)
    if (b < kMinBucket || b > kMaxBucket || (b & (b - 1)))
      throw Error(fmt::format("megamoe-tune: bucket {}: expected a power of two from {} to {}", b, kMinBucket,
                              kMaxBucket));
  return buckets;
}

Plan make_plan(const TuneOptions& o, Clock::time_point t0, const std::string& card) {
  Plan p{o, o.print ? o.print : [](const std::string& s) { fmt::print("{}\n", s), std::fflush(stdout); }};
  p.t0 = t0;
  p.name = tuned_name(o.out);
  check_options(o);
  p.card = card;
  p.loaded = load_config(o.config);
  const TableChoice table = choose_table(p.loaded, card, o.table);  // --bucket-table's, this card's own, or the default
  p.model = with_chosen_table(p.loaded, table);
  p.table_line = table.note;
  if (o.world > 1) config_for_world(p.model, o.world);  // refuses a world that does not divide the experts
  take_start(p);
  p.buckets = bucket_list(o.buckets);
  // Timed at world 1 on the experts a rank holds where the keys count: bucket b is then b tokens.
  p.per_rank = p.start.keys_experts_per_rank == p.model.model.experts ? p.start
                                                                       : with_experts(p.start, p.start.keys_experts_per_rank);
  p.start_modes = modes_of(p.entry_at(p.buckets.front()));
  if (o.modes) {
    BucketConfig probe = with_modes(p.per_rank, p.entry_at(p.buckets.front()), *o.modes);
    std::string why;
    if (!allowed(p.per_rank, probe, &why))
      throw Error(fmt::format("megamoe-tune: modes {} do not suit {}: {}", to_string(*o.modes), p.model.name, why));
  }
  p.search_modes = !o.modes && (o.space.modes || o.space.fp8_wire);
  return p;
}

// No GPU: what a run would compile, for o.arch.
TuneResult compile_only(const Plan& p) {
  const TuneOptions& o = p.o;
  p.print(fmt::format("megamoe-tune --compile-only: {} from {}'s table for {}; buckets {}; {}", p.model.name,
                      p.start_name, o.arch, fmt::join(p.buckets, ","), p.table_line));
  TuneResult res;
  auto add = [&](std::pair<int, double> c) { res.kernels_compiled += c.first, res.compile_seconds += c.second; };
  if (p.search_modes)
    add(compile_ahead(p.per_rank, mode_phase_entries(p.per_rank, p.start, p.buckets, p.start_modes, o.space), o.arch,
                      o.threads, "modes", p.print));
  add(compile_ahead(p.per_rank, tile_phase_entries(p.per_rank, p.start, p.buckets, o.modes.value_or(p.start_modes), o.space),
                    o.arch, o.threads, "tiles", p.print));
  if (o.world > 1) {  // a rank's kernels for the starting table's keys (the tuned tiles are known only on the GPU)
    std::vector<BucketConfig> entries;
    for (const BucketConfig& e : p.start.buckets)
      if (e.bucket <= p.buckets.back()) entries.push_back(with_modes(p.per_rank, e, o.modes.value_or(p.start_modes)));
    add(compile_ahead(p.start, entries, o.arch, o.threads, fmt::format("world {}", o.world), p.print, o.world));
  }
  res.seconds = seconds_since(p.t0);
  p.print(fmt::format("compiled {} kernels in {:.0f} s", res.kernels_compiled, res.seconds));
  return res;
}

// The journal's header: everything a resumed run must share with the one it resumes.
json journal_header(const Plan& p, const std::string& device) {
  const TuneOptions& o = p.o;
  std::vector<std::string> start_entries;
  for (const BucketConfig& b : p.start.buckets) start_entries.push_back(entry_text(b));
  const nlohmann::ordered_json model_json = config_json(p.model, p.model.name, "");
  return {{"journal", "megamoe-tune/1"},
          {"config", p.model.name},
          {"model", json::parse(model_json["model"].dump())},
          {"activation", json::parse(model_json["activation"].dump())},
          {"start", start_entries},
          {"device", device},
          {"buckets", p.buckets},
          {"space", {{"fp8_resident", o.space.fp8_resident}, {"fp8_wire", o.space.fp8_wire}, {"modes", o.space.modes}}},
          {"pairs", o.pairs},
          {"min_gain", o.min_gain},
          {"modes", o.modes ? json(to_string(*o.modes)) : json(nullptr)},
          {"seed", o.seed},
          {"world", o.world},
          {"transport", to_string(o.transport)}};
}

// The search on one GPU: the modes, every bucket's tiles and weight source, the report's times.
class GpuSearch {
 public:
  GpuSearch(const Plan& p, Bench& bench, TuneJournal& journal)
      : p_(p), o_(p.o), dev_(bench.device()), journal_(journal),
        search_(p.o, p.per_rank, bench, journal, p.t0) {}

  PairTimer& timer_for(int b) {  // a bucket's input sets, made once
    auto& t = timers_[b];
    if (!t) t = std::make_unique<PairTimer>(dev_, p_.per_rank.model, b, o_.seed);
    return *t;
  }
  void release_timers() { timers_.clear(); }

  // The card's sustained clock, on the largest bucket's entry under `modes`.
  void settle(const Modes* modes, int rounds, int seconds, const std::string& what) {
    const int b = p_.buckets.back();
    PairTimer& timer = timer_for(b);
    Side s = search_.side(timer, modes ? with_modes(p_.per_rank, p_.entry_at(b), *modes) : p_.entry_at(b));
    std::string how;
    timer.settle(s.calls, rounds, seconds, &how);
    p_.print(what + how);
  }

  // 1. The table-wide modes: as asked, from the journal, or each candidate timed beside the start.
  Modes choose_modes(const std::vector<Modes>& mode_list) {
    Modes modes = o_.modes.value_or(p_.start_modes);
    if (!p_.search_modes) {
      p_.print(fmt::format("modes: {} for every bucket ({})", to_string(modes), o_.modes ? "as asked" : "the start's"));
      return modes;
    }
    if (auto m = journal_.modes()) {
      for (const Modes& c : mode_list)
        for (const Modes& w : wire_candidates(c, o_.space))
          if (to_string(w) == *m) modes = w;
      p_.print(fmt::format("modes: {} (from the journal)", to_string(modes)));
      return modes;
    }
    modes = best_modes(mode_list, p_.start_modes);
    modes = best_modes(wire_candidates(modes, o_.space), modes);
    journal_.set_modes(to_string(modes));
    p_.print(fmt::format("modes: {} for every bucket", to_string(modes)));
    return modes;
  }

  // 3. One bucket's search from its slot of `tuned`, which it leaves holding the winner.
  BucketReport search_bucket(int b, BucketConfig& slot, bool& cut_short) {
    const auto tb = Clock::now();
    BucketReport r;
    r.bucket = b;
    r.rows_per_expert = mean_rows_per_expert(p_.per_rank, b);
    r.start_tactic = tactic_label(p_.entry_at(b));
    if (auto done = journal_.bucket(b)) {
      slot = entry_from_text(p_.per_rank, b, done->entry);
      p_.print(fmt::format("bucket {:>5}: {} (resumed from the journal)", b, tactic_label(slot)));
      return report_from_json(done->report);
    }
    if (search_.out_of_time()) {
      cut_short = true;
      r.tuned_tactic = tactic_label(slot);
      r.note = "not searched: the --minutes bound was reached";
      p_.print(fmt::format("bucket {:>5}: {} (not searched: the --minutes bound was reached)", b, tactic_label(slot)));
      return r;
    }
    PairTimer& timer = timer_for(b);
    Descent d{timer, search_.side(timer, slot), r};
    timer.warm(d.inc.calls, 0.3);
    descend(d, Knob::stage1);
    descend(d, Knob::stage2);
    if (descend(d, Knob::weights)) descend(d, Knob::stage1), descend(d, Knob::stage2);
    cut_short |= d.cut;
    slot = d.inc.entry;
    r.tuned_tactic = tactic_label(slot);
    time_start_beside(d, b, slot);
    if (d.cut) r.note = "searched in part: the --minutes bound was reached (a later run with the journal goes on)";
    else journal_.add_bucket(b, {entry_text(slot), report_json(r)});  // a bucket cut short is searched again on resume
    p_.print(fmt::format("bucket {:>5}: {}: {:.4f} ms, the start's {:.4f} ms ({:.3f}x); {} timed, {} pruned, {:.1f} s",
                         b, r.tuned_tactic, r.tuned_ms, r.start_ms, r.start_ms / r.tuned_ms, r.timed, r.pruned,
                         seconds_since(tb)));
    return r;
  }

 private:
  struct Timed {
    BucketConfig entry;
    double ms;
  };
  // A bucket's coordinate search: the incumbent, every candidate's median in its own pair.
  struct Descent {
    PairTimer& timer;
    Side inc;
    BucketReport& r;
    std::vector<Timed> timed;
    bool cut = false;  // the --minutes bound stopped this bucket's search
  };

  // Each candidate of knob k beside the incumbent; the best by --min-gain replaces it (true then).
  bool descend(Descent& d, Knob k) {
    std::vector<Pruned> pruned;
    const std::vector<BucketConfig> list = candidates(p_.per_rank, d.inc.entry, k, o_.space, &pruned);
    d.r.pruned += int(pruned.size());
    const BucketConfig* best = nullptr;
    double best_ratio = 1 - o_.min_gain;
    for (const BucketConfig& c : list) {
      if ((d.cut = search_.out_of_time())) break;
      const PairTimes t = search_.pair(d.timer, d.inc, c);
      ++d.r.timed;
      d.timed.push_back({c, t.candidate_ms});
      if (t.ratio < best_ratio) best = &c, best_ratio = t.ratio;
    }
    if (!best) return false;
    const BucketConfig next = *best;
    d.inc.calls = CapturedCalls();  // the graph before the runtime it launches into
    d.inc = search_.side(d.timer, next);
    return true;
  }

  // The starting entry beside the tuned one (the same entry: one time for both), and the runner-up.
  void time_start_beside(Descent& d, int b, const BucketConfig& tuned) {
    BucketReport& r = d.r;
    const BucketConfig& first = p_.entry_at(b);
    if (entry_text(first) == entry_text(tuned)) {
      r.start_ms = r.tuned_ms = d.timer.time_pair(d.inc.calls, d.inc.calls, o_.pairs).incumbent_ms;
    } else {
      const PairTimes t = search_.pair(d.timer, d.inc, first);
      r.tuned_ms = t.incumbent_ms, r.start_ms = t.candidate_ms;
    }
    for (const Timed& t : d.timed)
      if (entry_text(t.entry) != entry_text(tuned) && (r.runner_up_ms == 0 || t.ms < r.runner_up_ms))
        r.runner_up_ms = t.ms, r.runner_up_tactic = tactic_label(t.entry);
  }

  // Each candidate beside `base` at every bucket: the geometric mean of candidate / base.
  double mode_score(const Modes& base, const Modes& cand) {
    std::vector<double> r;
    for (int b : p_.buckets) {
      PairTimer& timer = timer_for(b);
      const Side inc = search_.side(timer, with_modes(p_.per_rank, p_.entry_at(b), base));
      r.push_back(search_.pair(timer, inc, with_modes(p_.per_rank, p_.entry_at(b), cand)).ratio);
    }
    const double g = geometric_mean(r);
    p_.print(fmt::format("modes {}: {:.3f} of {}'s time (geometric mean over {} buckets, {:.3f} to {:.3f})",
                         to_string(cand), g, to_string(base), r.size(), *std::min_element(r.begin(), r.end()),
                         *std::max_element(r.begin(), r.end())));
    return g;
  }

  Modes best_modes(const std::vector<Modes>& list, const Modes& base) {
    Modes best = base;
    double best_g = 1 - o_.min_gain;
    for (const Modes& m : list)
      if (!(m == base))
        if (const double g = mode_score(base, m); g < best_g) best = m, best_g = g;
    return best;
  }

  const Plan& p_;
  const TuneOptions& o_;
  Device& dev_;
  TuneJournal& journal_;
  Search search_;
  std::map<int, std::unique_ptr<PairTimer>> timers_;
};

// 16384 and 32768 (no bench times them) take 8192's entry where it was timed and they were not:
// their rows per expert are wider still, and the search's tiles there are already the widest.
bool fill_above_8192(const Plan& p, Config& tuned) {
  const bool above_from_8192 = p.buckets.back() == 8192;
  for (BucketConfig& e : tuned.buckets)
    if (above_from_8192 && e.bucket > 8192) {
      const int keep = e.bucket;
      e = tuned.buckets[bucket_index(8192)];
      e.bucket = keep;
    }
  return above_from_8192;
}

// The config, written by rename and read back, and its report beside it.
void write_tuned(const Plan& p, const Config& tuned, const Modes& modes, const std::string& device_name,
                 bool above_from_8192, const std::string& journal_path, TuneResult& res) {
  const TuneOptions& o = p.o;
  std::string others;  // the model's tables kept beside this card's
  for (const BucketTable& t : p.loaded.tables)
    if (t.card != device_name) others += fmt::format("{}{}", others.empty() ? "" : ", ", table_name(t.card));
  const std::string description = fmt::format(
      "{} (model: {}). The bucket table of {} tuned by megamoe-tune on {}, from {}'s table: buckets {} timed; modes {} "
      "for every bucket; {}{}.{}",
      p.name, p.model.name, device_name, today(), p.start_name, fmt::join(p.buckets, ","), to_string(modes),
      o.world > 1 ? fmt::format("dispatch knobs searched over {} ranks ({})", o.world, to_string(o.transport))
                  : "dispatch as the start's (not searched: world 1)",
      above_from_8192 ? "; buckets 16384 and 32768 take 8192's entry (not timed)" : "",
      others.empty() ? "" : fmt::format(" The other tables ({}) as {} holds them.", others, p.model.name));
  // The model's config with this card's table replaced, or added beside the others.
  const Config written = with_card_table(p.loaded, device_name, tuned.buckets);
  const std::string text = config_text(config_json(written, p.name, description));
  if (const auto dir = std::filesystem::path(o.out).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
  res.tuned = with_table(parse_config(text, o.out), device_name);  // what the file will hold, this card's table
  const std::string tmp = o.out + ".tmp";
  if (!(std::ofstream(tmp) << text)) throw Error(fmt::format("megamoe-tune: cannot write {}", tmp));
  std::filesystem::rename(tmp, o.out);  // whole or not at all
  res.seconds = seconds_since(p.t0);
  res.report = report_text(res, p.model.name, p.start_name, device_name, o.world, o.transport);
  const std::string report_path = (std::filesystem::path(o.out).parent_path() / (p.name + ".report.txt")).string();
  if (!(std::ofstream(report_path) << res.report))
    throw Error(fmt::format("megamoe-tune: wrote {}, but cannot write its report {}", o.out, report_path));
  p.print(res.report);
  p.print(fmt::format("wrote {} and {}; journal {}", o.out, report_path, journal_path));
}

}  // namespace

std::string tuned_name(const std::string& out_path) {
  const std::filesystem::path p(out_path);
  const std::string stem = p.stem().string();
  if (p.extension() != ".json" || stem.empty() || stem.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    throw Error(fmt::format("megamoe-tune: --out {}: expected NAME.json with NAME of [a-z0-9_] (a config's name is its "
                            "file's)",
                            out_path));
  return stem;
}

TuneResult run_tune(const TuneOptions& o) {
  const auto t0 = Clock::now();
  if (o.compile_only) return compile_only(make_plan(o, t0, ""));
  make_plan(o, t0, "");  // the options and configs checked before any GPU is opened
  const Plan p = make_plan(o, t0, workload::gpu_card(BackendKind::cuda, 0));  // then its table for this card
  WarnOnce warn_once(p.print);

  auto bench = std::make_unique<Bench>(p.per_rank, o.space, p.buckets.back(), o.seed);
  Device& dev = bench->device();
  const std::string arch = dev.arch(), device_name = dev.name();
  p.print(fmt::format("megamoe-tune: {} ({} experts a rank at the table's keys, {} / {}, top-{}) from {}'s table on {}, "
                      "Hopper path; buckets {}",
                      p.model.name, p.per_rank.model.experts, p.model.model.model_dim, p.model.model.inter_dim,
                      p.model.model.topk, p.start_name, device_name, fmt::join(p.buckets, ",")));
  p.print(p.table_line);
  const std::string journal_path =
      o.journal.empty() ? (std::filesystem::path(o.out).parent_path() / (p.name + ".journal.jsonl")).string() : o.journal;
  TuneJournal journal(journal_path, journal_header(p, device_name));
  if (journal.resumed_pairs())
    p.print(fmt::format("journal {}: resuming ({} pairs timed, {} buckets done)", journal_path, journal.resumed_pairs(),
                        journal.resumed_buckets()));
  GpuSearch search(p, *bench, journal);
  TuneResult res;

  // 1. The table-wide modes.
  std::vector<std::string> modes_pruned;
  const std::vector<Modes> mode_list = mode_candidates(p.per_rank, p.start_modes, o.space, &modes_pruned);
  if (p.search_modes) {
    for (const std::string& pruned : modes_pruned) p.print("pruned: " + pruned);
    auto [n, s] = compile_ahead(p.per_rank, mode_phase_entries(p.per_rank, p.start, p.buckets, p.start_modes, o.space),
                                arch, o.threads, "modes", p.print);
    res.kernels_compiled += n, res.compile_seconds += s;
  }
  search.settle(nullptr, 3, 30, "clock: ");
  const Modes modes = search.choose_modes(mode_list);
  res.modes = modes;

  // 2. Every bucket's candidates compiled ahead: both weight sources' tiles.
  {
    auto [n, s] = compile_ahead(p.per_rank, tile_phase_entries(p.per_rank, p.start, p.buckets, modes, o.space), arch,
                                o.threads, "tiles", p.print);
    res.kernels_compiled += n, res.compile_seconds += s;
  }
  if (res.compile_seconds > 5) search.settle(&modes, 1, 15, "clock after compiling: ");  // the card idled

  // 3. Each bucket's search.
  Config tuned = p.start;
  for (BucketConfig& e : tuned.buckets) e = with_modes(p.per_rank, e, modes);
  for (int b : p.buckets) res.rows.push_back(search.search_bucket(b, tuned.buckets[bucket_index(b)], res.cut_short));

  // 4. Over several ranks, the dispatch knobs, on groups of ranks (the world-1 bench freed first).
  if (o.world > 1) {
    search.release_timers();
    bench.reset();
    DispatchSearch(o, p.model, journal, p.t0, p.print).run(tuned, p.buckets, arch, res);
  }
  const bool above_from_8192 = fill_above_8192(p, tuned);
  tuned.name = p.name;
  write_tuned(p, tuned, modes, device_name, above_from_8192, journal_path, res);
  return res;
}

}  // namespace megamoe::tune
