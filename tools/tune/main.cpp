// megamoe-tune: a tuned bucket table for a model's config, in one GPU run (docs/tools.md).
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/cli.hpp"
#include "common/kernel_limits.hpp"
#include "megamoe/megamoe.hpp"
#include "tune/tuner.hpp"

using namespace megamoe;

namespace {

constexpr const char* kTool = "megamoe-tune";
const char* kUsage = R"(usage: megamoe-tune --config NAME --out FILE.json [--from CONFIG] [--world W]
                    [--transport loopback|peer] [--buckets LIST]
                    [--minutes M] [--journal FILE] [--pairs N] [--min-gain G] [--no-fp8-resident]
                    [--no-fp8-wire] [--no-modes] [--modes M] [--seed S] [-j N]
                    [--compile-only [--arch A]]

Searches the Hopper path's knobs for the config's model on GPU 0 and writes FILE.json, a config
named FILE with the tuned bucket table, and FILE.report.txt: per bucket the starting entry's time
against the tuned one's (side by side), their ratio, and the runner-up.
  1. the table-wide modes (x and h scale modes, where the activation allows them, then the
     combine wire): each timed beside the starting table at every bucket listed, the best
     geometric mean taken (over several ranks every bucket must take the same);
  2. per bucket: Stage1's token and weight tiles, then Stage2's, then the weight source (mxfp4 or
     fp8_resident; then the tiles again where it changed), a coordinate search in which each
     candidate is timed beside the incumbent (graph replays in turn, medians) and replaces it
     where it is faster by --min-gain;
  3. the starting entry beside the tuned one, for the report;
  4. with --world W above 1: per bucket, the dispatch knobs (blocks 8..128, persistent, stride
     1, 2, 4), each candidate timed on W ranks of this process beside the incumbent (every
     rank's calls replayed together, the slowest rank's time), at the tokens a rank passes
     where the bucket is taken at that world.
Candidates that the shape contract refuses are pruned, never compiled; every candidate's kernels
are compiled ahead on every core through the kernel cache; timing starts once the card holds its
sustained clock. A bucket b is timed as b tokens on the experts a rank holds where the table's
keys count (bucket_keys.experts_per_rank), so the table serves every world size (docs/configs.md).
Buckets 16384 and 32768 (no bench times them) take 8192's tuned entry where 8192 is timed; other
buckets not listed keep the starting table's entries, with the modes chosen.
  --config C       the model: a built-in config's name or a path ending in .json
  --out FILE.json  the tuned config (a config's name is its file's: FILE of [a-z0-9_])
  --from CONFIG    start from CONFIG's bucket table (default: the config's own); the knobs not
                   searched (dispatch, bounds_check) stay the config's own
  --world W        1 (default): the tiles and modes only (they follow the rows per expert, so
                   one table serves every world); 2..16: also the dispatch knobs, which only a
                   group reads, timed on W ranks (the world must divide the model's experts)
  --transport T    the group's ranks with --world: loopback (default: every rank on GPU 0,
                   each on its share of the SMs, so the knobs suit that rather than ranks on
                   GPUs of their own) or peer (rank r on GPU r, W GPUs with peer access)
  --buckets LIST   the buckets to time (default 1,2,4,...,8192)
  --minutes M      stop searching after M minutes (buckets left keep their incumbents; the
                   journal lets a later run go on)
  --journal FILE   default FILE.journal.jsonl beside --out: a run with the same journal, config,
                   starting table, device and options resumes where it stopped
  --pairs N        replays of each side per comparison (default 10)
  --min-gain G     the least gain that replaces an incumbent (default 0.005)
  --no-fp8-resident, --no-fp8-wire, --no-modes   leave those knobs as the starting table has them
  --modes x=block|row,h=block|static,wire=bf16|fp8   take these table-wide modes instead of
                   searching them (a part left out: x block, h block, wire bf16)
  --compile-only   no GPU: compile what the run would (the modes phase's kernels and the tiles
                   under --modes, or under the starting table's modes) into the kernel cache
  --arch A         --compile-only's target (default sm_90a)
  --seed S         weights and inputs (default 123)
  -j N             compile threads (default: every core)
Exit status: 0 on success, 1 on error, 2 on bad usage, 3 when no GPU is present.
)";

}  // namespace

int main(int argc, char** argv) {
  tune::TuneOptions o;
  std::string modes_text, transport = "loopback";
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&] { return cli::next_value(kTool, argc, argv, i); };
    if (s == "-h" || s == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    } else if (s == "--config") o.config = value();
    else if (s == "--out") o.out = value();
    else if (s == "--from") o.start = value();
    else if (s == "--world") o.world = int(cli::parse_int(kTool, s, value()));
    else if (s == "--transport") transport = value();
    else if (s == "--buckets")
      for (std::int64_t b : cli::parse_int_list(kTool, s, value())) o.buckets.push_back(int(b));
    else if (s == "--minutes")
      o.minutes = cli::parse_number(kTool, s, value(), 1e-3, 1e6, "a number of minutes above 0");
    else if (s == "--journal") o.journal = value();
    else if (s == "--pairs") o.pairs = int(cli::parse_int(kTool, s, value()));
    else if (s == "--min-gain") o.min_gain = cli::parse_number(kTool, s, value(), 0, 0.499, "a number from 0 to below 0.5");
    else if (s == "--no-fp8-resident") o.space.fp8_resident = false;
    else if (s == "--no-fp8-wire") o.space.fp8_wire = false;
    else if (s == "--no-modes") o.space.modes = false;
    else if (s == "--modes") modes_text = value();
    else if (s == "--compile-only") o.compile_only = true;
    else if (s == "--arch") o.arch = value();
    else if (s == "--seed") o.seed = std::uint64_t(cli::parse_int(kTool, s, value()));
    else if (s == "-j") o.threads = int(cli::parse_int(kTool, s, value()));
    else cli::usage_error(kTool, "unknown argument '" + s + "'");
  }
  if (o.config.empty()) cli::usage_error(kTool, "--config NAME is required");
  if (o.out.empty()) cli::usage_error(kTool, "--out FILE.json is required");
  if (o.world < 1 || o.world > kMaxWorld)
    cli::usage_error(kTool, fmt::format("--world {}: expected 1 to {}", o.world, int(kMaxWorld)));
  if (transport != "loopback" && transport != "peer")
    cli::usage_error(kTool, "--transport " + transport + ": expected loopback or peer (the ranks run in this process)");
  o.transport = transport_from_name(transport);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // loopback ranks' streams on queues of their own (docs/ep.md)
  if (o.pairs < 3) cli::usage_error(kTool, "--pairs must be at least 3");
  if (o.threads < 0) cli::usage_error(kTool, "-j expects a count of threads, 0 for every core");
  return cli::run_reporting_errors([&] {
    if (!modes_text.empty()) o.modes = tune::parse_modes(modes_text, {});
    tune::tuned_name(o.out);
    tune::run_tune(o);
    return 0;
  });
}
