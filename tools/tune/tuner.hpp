// megamoe-tune: a tuned bucket table for a model, in one GPU run (docs/tools.md, "megamoe-tune").
//   1. the table-wide modes (x and h scales, then the combine wire), each timed beside the starting
//      table's at every bucket listed, the best geometric mean taken;
//   2. per bucket, a coordinate search over Stage1's tiles, Stage2's and the weight source (and the
//      tiles again where the weights changed), each candidate timed beside the incumbent;
//   3. the starting table's entry timed beside the tuned one, for the report;
//   4. over several ranks (world > 1), per bucket, the dispatch knobs (blocks, persistent, stride),
//      each candidate timed on a group of ranks of this process beside the incumbent.
// Every candidate's kernels are compiled ahead, in parallel, through the kernel cache; timing
// starts once the card holds its sustained clock; a journal lets a run cut short resume.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/ep.hpp"
#include "tune/tactic_space.hpp"

namespace megamoe::tune {

struct TuneOptions {
  std::string config;        // the model: a built-in config's name or a .json path
  std::string start;         // the table to start from: another config's (empty: the model's own)
  // Which of a config's bucket tables (the model's and start's) the search starts from: a card's
  // name or "default" (empty: this GPU's own, else the default). The tuned table is always written
  // as this GPU's: replacing the config's table for it, or added beside the others.
  std::string table;
  std::vector<int> buckets;  // the table keys to time (empty: 1 to 8192)
  double minutes = 0;        // a bound on the search (0: none); past it the buckets left keep their incumbents
  std::string out;           // the tuned config, NAME.json (the config is named NAME)
  std::string journal;       // empty: NAME.journal.jsonl beside out
  SpaceOptions space;
  int pairs = 10;            // replays of each side per comparison
  double min_gain = 0.005;   // a candidate replaces the incumbent where it is faster by at least this much
  std::uint64_t seed = 123;  // weights and inputs
  int threads = 0;           // compile threads (0: every core)
  std::optional<Modes> modes;  // the table-wide modes to take instead of searching them
  bool compile_only = false;   // no GPU: compile what the run would (the tiles under `modes`, or the start's), for arch
  std::string arch = "sm_90a";
  int world = 1;  // above 1: phase 4 on `world` ranks of this process
  Transport transport = Transport::loopback;  // loopback: every rank on GPU 0 (its share of the SMs); peer: rank r on GPU r
  std::function<void(const std::string&)> print;  // progress and the report, a line at a time (default stdout)
};

struct BucketReport {
  int bucket = 0;
  double rows_per_expert = 0;        // mean, at the table's keys
  std::string start_tactic, tuned_tactic, runner_up_tactic;  // tactic_label()s
  double start_ms = 0, tuned_ms = 0;  // per call, timed side by side
  double runner_up_ms = 0;            // the runner-up's median in its own pair (0: none)
  int timed = 0, pruned = 0;          // candidates timed (or read from the journal), pruned by the contract
  std::string note;                   // "resumed", "not searched: ...", or empty
};

// Phase 4's row of a bucket: the dispatch knobs over several ranks.
struct DispatchReport {
  int bucket = 0;
  std::int64_t tokens = 0;                // a rank's, in the calls timed (the most the key takes at the world)
  std::string start, tuned, runner_up;    // dispatch_label()s; start: the tuned tiles' entry as phase 3 left it
  double start_ms = 0, tuned_ms = 0, runner_up_ms = 0;  // per call, the slowest rank's
  int timed = 0;
  std::string note;
};

struct TuneResult {
  Config tuned;  // at world 1, as load_config(out) gives it, with this GPU's (the tuned) table in use
  Modes modes;
  std::vector<BucketReport> rows;
  std::vector<DispatchReport> dispatch_rows;  // world > 1
  std::string report;  // the report's text (also written to NAME.report.txt)
  double seconds = 0, compile_seconds = 0;
  int kernels_compiled = 0;  // compiled in this run (not found in the cache)
  bool cut_short = false;    // the --minutes bound stopped the search
};

// Throws Error (ConfigError, NoGpuError) naming what is wrong before any timing where it can.
TuneResult run_tune(const TuneOptions& options);

// NAME for an output path NAME.json, or an Error naming the path and what a config's name may be.
std::string tuned_name(const std::string& out_path);

}  // namespace megamoe::tune
