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
constexpr const char* kDescription =
    "Searches the Hopper path's knobs for the config's model on GPU 0 and writes FILE.json, a config named FILE "
    "with the config's bucket tables and the tuned one as this GPU's (its name as the driver gives it: \"NVIDIA "
    "H200\"; docs/configs.md, \"A table per card\"), and FILE.report.txt: per bucket the starting entry's time against the tuned "
    "one's (side by side), their ratio, and the runner-up.\n"
    "1. the table-wide modes (x and h scale modes, where the activation allows them, then the combine wire): each "
    "timed beside the starting table at every bucket listed, the best geometric mean taken (over several ranks "
    "every bucket must take the same);\n"
    "2. per bucket: Stage1's token and weight tiles, then Stage2's, then the weight source (mxfp4 or fp8_resident; "
    "then the tiles again where it changed), a coordinate search in which each candidate is timed beside the "
    "incumbent (graph replays in turn, medians) and replaces it where it is faster by --min-gain;\n"
    "3. the starting entry beside the tuned one, for the report;\n"
    "4. with --world W above 1: per bucket, the dispatch knobs (blocks 8..128, persistent, stride 1, 2, 4), each "
    "candidate timed on W ranks of this process beside the incumbent (every rank's calls replayed together, the "
    "slowest rank's time), at the tokens a rank passes where the bucket is taken at that world.\n"
    "Candidates that the shape contract refuses are pruned, never compiled; every candidate's kernels are compiled "
    "ahead on every core through the kernel cache; timing starts once the card holds its sustained clock. A bucket "
    "b is timed as b tokens on the experts a rank holds where the table's keys count "
    "(bucket_keys.experts_per_rank), so the table serves every world size (docs/configs.md). Buckets 16384 and "
    "32768 (no bench times them) take 8192's tuned entry where 8192 is timed; other buckets not listed keep the "
    "starting table's entries, with the modes chosen.";

// The flags into `o` (and the modes' text and the transport's name, read after).
void add_flags(CLI::App& app, tune::TuneOptions& o, std::string& modes_text, std::string& transport) {
  cli::add_config(app, o.config)->required();
  app.add_option("--out", o.out, "the tuned config (a config's name is its file's: FILE of [a-z0-9_])")
      ->type_name("FILE.json")->required();
  app.add_option("--from", o.start,
                 "start from CONFIG's bucket table (default: the config's own); the knobs not searched (dispatch, "
                 "bounds_check) stay the config's own")
      ->type_name("CONFIG");
  cli::add_bucket_table(app, o.table,
                 "this GPU's own, else the config's default (and --from CONFIG's by the same rule); the table tuned is "
                 "written as this GPU's whichever the start, replacing the config's table for this card or added "
                 "beside its others");
  app.add_option("--world", o.world,
                 "1: the tiles and modes only (they follow the rows per expert, so one table serves every world); "
                 "2..32: also the dispatch knobs, which only a group reads, timed on W ranks (the world must divide "
                 "the model's experts)")
      ->type_name("W")->check(cli::in_range(1, kMaxWorld));
  app.add_option("--transport", transport,
                 "the group's ranks with --world: loopback (every rank on GPU 0, each on its share of the SMs, so "
                 "the knobs suit that rather than ranks on GPUs of their own) or peer (rank r on GPU r, W GPUs with "
                 "peer access)")
      ->type_name("T")->check(cli::one_of({"loopback", "peer"}));
  app.add_option("--buckets", o.buckets, "the buckets to time (default 1,2,4,...,8192)")
      ->delimiter(',')->type_name("LIST")->check(cli::at_least(1, "buckets"));
  app.add_option("--minutes", o.minutes,
                 "stop searching after M minutes (buckets left keep their incumbents; the journal lets a later run "
                 "go on)")
      ->type_name("M")->check(cli::finite(1e-3, 1e6, "a number of minutes above 0"));
  app.add_option("--journal", o.journal,
                 "default FILE.journal.jsonl beside --out: a run with the same journal, config, starting table, "
                 "device and options resumes where it stopped")
      ->type_name("FILE");
  app.add_option("--pairs", o.pairs, "replays of each side per comparison")->type_name("N")->check(cli::at_least(3));
  app.add_option("--min-gain", o.min_gain, "the least gain that replaces an incumbent")
      ->type_name("G")->check(cli::finite(0, 0.499, "a number from 0 to below 0.5"));
  app.add_flag_callback("--no-fp8-resident", [&o] { o.space.fp8_resident = false; },
                        "leave the weight source as the starting table has it");
  app.add_flag_callback("--no-fp8-wire", [&o] { o.space.fp8_wire = false; },
                        "leave the combine wire as the starting table has it");
  app.add_flag_callback("--no-modes", [&o] { o.space.modes = false; },
                        "leave the scale modes as the starting table has them");
  app.add_option("--modes", modes_text,
                 "x=block|row,h=block|static,wire=bf16|fp8: take these table-wide modes instead of searching them "
                 "(a part left out: x block, h block, wire bf16)")
      ->type_name("M");
  app.add_flag("--compile-only", o.compile_only,
               "no GPU: compile what the run would (the modes phase's kernels and the tiles under --modes, or under "
               "the starting table's modes) into the kernel cache");
  app.add_option("--arch", o.arch, "--compile-only's target")->type_name("A");
  app.add_option("--seed", o.seed, "weights and inputs")->type_name("S")->check(cli::at_least(0, "an integer"));
  app.add_option("-j", o.threads, "compile threads (0: every core)")->type_name("N")->check(cli::at_least(0));
}

}  // namespace

int main(int argc, char** argv) {
  tune::TuneOptions o;
  std::string modes_text, transport = "loopback";
  CLI::App app;
  cli::describe(app, kTool, kDescription, "Exit status: 0 on success, 1 on error, 2 on bad usage, 3 when no GPU is present.");
  add_flags(app, o, modes_text, transport);
  cli::parse(app, argc, argv);
  o.transport = transport_from_name(transport);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // loopback ranks' streams on queues of their own (docs/ep.md)
  return cli::run_reporting_errors([&] {
    if (!modes_text.empty()) o.modes = tune::parse_modes(modes_text, {});
    tune::tuned_name(o.out);
    tune::run_tune(o);
    return 0;
  });
}
