// megamoe-precompile: compiles a config's kernels into the disk cache ahead of time, through the
// same build path as the run-time call, so that what it compiles is a cache hit at run time.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/path_requirements.hpp"
#include "common/cli.hpp"
#include "common/kernel_limits.hpp"
#include "jit/kernel_builder.hpp"
#include "jit/precompile.hpp"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

using namespace megamoe;

namespace {

constexpr const char* kTool = "megamoe-precompile";

struct Args {
  std::string config, buckets_of, arch, backend = "cuda", path = "auto", transport = "loopback", table;
  std::vector<int> buckets;
  bool all = false, list = false, dry_run = false;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  int world = 1;
  int shared = -1;  // --shared-experts (-1: the config's)
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app;
  cli::describe(app, kTool,
                "Compiles the kernels of a config's batch-size buckets into the kernel cache ($MEGAMOE_CACHE_DIR, "
                "else $XDG_CACHE_HOME/megamoe, else ~/.cache/megamoe).",
                "Exit status: 0 when every kernel is cached or compiled, 1 on any failure (and, before compiling, "
                "where nothing would be saved: a cache folder this user cannot write, or MEGAMOE_DISABLE_CACHE=1), "
                "2 on bad usage.");
  cli::add_config(app, a.config)->required();
  app.add_option("--buckets-of", a.buckets_of,
                 "the config's model with config C's bucket table (what megamoe-bench --against C runs)")
      ->type_name("C");
  app.add_option("--shared-experts", a.shared,
                 "the config's model with N shared experts (what megamoe-run and megamoe-bench --shared-experts N "
                 "run: the kernels of the model without them, and one that routes every token to them; -1: the "
                 "config's)")
      ->type_name("N")->check(cli::at_least(-1));
  cli::add_bucket_table(app, a.table,
                 "every table the config holds (a cache built ahead serves whichever card loads it; a kernel two "
                 "tables share compiles once)");
  auto* bucket = app.add_option("--bucket", a.buckets, "a bucket (power of two, 1..32768); repeatable")
                     ->type_name("N")->check(cli::in_range(1, kMaxBucket));
  auto* all = app.add_flag("--all", a.all, "every bucket");
  bucket->excludes(all);
  app.add_option("--arch", a.arch, "target (default: the backend's, sm_90a for cuda)")->type_name("ARCH");
  app.add_option("--backend", a.backend, "cuda or hip")->type_name("B")->check(cli::one_of({"cuda", "hip"}));
  app.add_option("--path", a.path,
                 "expert-GEMM kernels: auto (what the run time picks for the arch), portable, tensor_core, hopper, "
                 "or all (those the arch can run)")
      ->type_name("P")->check(cli::one_of({"auto", "portable", "tensor_core", "hopper", "all"}));
  app.add_option("--world", a.world,
                 "1: the single-GPU layer's kernels; more: those a rank of an expert-parallel group launches (the "
                 "fused and the serial path's; the same kernels for any N > 1)")
      ->type_name("N")->check(cli::in_range(1, kMaxWorld));
  app.add_option("--transport", a.transport,
                 "with --world N > 1: nvshmem for the nvshmem transport's kernels (linked with NVSHMEM's device "
                 "library, found as at run time: MEGAMOE_NVSHMEM_DIR); any other transport runs the same kernels "
                 "as the default")
      ->type_name("T")->check(cli::one_of({"loopback", "peer", "ipc", "nvshmem"}));
  app.add_option("-j", a.jobs, "parallel compiles (default: all cores)")->type_name("N")->check(cli::at_least(1));
  app.add_flag("--list", a.list, "list the kernels of each bucket, compile nothing");
  app.add_flag("--dry-run", a.dry_run, "say per kernel whether it is cached, compile nothing");
  cli::parse(app, argc, argv);
  if (!a.all && a.buckets.empty()) cli::usage_error(kTool, "give either --bucket N (one or more) or --all");
  if (a.transport == "nvshmem" && a.world < 2) cli::usage_error(kTool, "--transport nvshmem is for --world N > 1");
  return a;
}

// The config the arguments name, with its buckets (every one for --all), each checked.
Config planned_config(const Args& args, std::vector<int>& buckets) {
  Config config = load_config(args.config);
  if (!args.buckets_of.empty()) config = with_buckets_of(config, load_config(args.buckets_of));
  if (args.shared >= 0) config = with_shared_experts(std::move(config), args.shared);
  buckets = args.buckets;
  if (args.all)
    for (auto& b : config.buckets) buckets.push_back(b.bucket);
  for (int b : buckets) config.bucket(b);  // rejects a size that is no bucket
  if (args.world > 1) config_for_world(config, args.world);  // a world the runtime would refuse, named now
  return config;
}

std::vector<KernelPath> planned_paths(const std::string& path, const Config& config, BackendKind backend,
                                      const std::string& arch) {
  std::vector<KernelPath> paths;
  if (path == "all") {
    for (KernelPath p : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper})
      if (path_runs(p, config, backend, arch)) paths.push_back(p);
  } else {
    paths.push_back(resolve_path(path_from_name(path), config, backend, arch));
  }
  return paths;
}

std::size_t name_width(const std::vector<PrecompileJob>& jobs) {  // as wide as the longest name
  std::size_t width = 6;
  for (auto& j : jobs) width = std::max(width, j.planned.rendered.name.size());
  return width;
}

// --list and --dry-run: each kernel with its buckets, and (dry run) whether the cache holds it.
void print_plan(const std::vector<PrecompileJob>& jobs, KernelBuilder& builder, bool dry_run) {
  const std::size_t width = name_width(jobs);
  for (auto& j : jobs) {
    std::string state;
    if (dry_run) {
      const std::string found = builder.cache().inspect(j.planned.key);
      state = found == "intact" ? "cached"
              : found.empty()   ? "would compile"
                                : "would compile (its entry is corrupt: " + found + ")";
    }
    std::string bl;
    for (int b : j.buckets) bl += (bl.empty() ? "" : ",") + std::to_string(b);
    fmt::print("{:<{}} {}  buckets {}{}{}\n", j.planned.rendered.name, width, j.planned.key.hex.substr(0, 16), bl,
               state.empty() ? "" : "  ", state);
  }
}

// Nothing compiled would be kept: said before compiling, not after (false then).
bool cache_can_keep(KernelBuilder& builder) {
  const std::string why = builder.cache().unwritable_reason();
  if (why.empty()) return true;
  if (!builder.cache().enabled())
    fmt::print(stderr, "megamoe-precompile: the kernel cache is disabled (MEGAMOE_DISABLE_CACHE=1): nothing "
                       "would be saved\n");
  else
    fmt::print(stderr, "megamoe-precompile: the kernel cache {} is not writable ({}): nothing would be saved; "
                       "set MEGAMOE_CACHE_DIR to a folder this user can write\n",
               builder.cache().root().string(), why);
  return false;
}

// Compiles the jobs with a line each as they end, then the table; the exit status.
int compile_and_report(KernelBuilder& builder, std::vector<PrecompileJob>& jobs, int parallel) {
  run_precompile(builder, jobs, parallel, [&](const PrecompileJob& j, std::size_t done, std::size_t total) {
    fmt::print("[{}/{}] {} {} ({:.1f} ms)\n", done, total,
               j.error.empty() ? std::string(to_string(j.report.origin)) : "FAILED", j.planned.rendered.name,
               j.report.seconds * 1e3);
    if (!j.error.empty()) fmt::print("{}\n", j.error);
    std::fflush(stdout);
  });
  const std::size_t width = name_width(jobs);
  int failed = 0;
  fmt::print("\n{:<{}} {:<16} {:<9} {:>9}\n", "kernel", width, "hash", "result", "ms");
  for (auto& j : jobs) {
    failed += !j.error.empty();
    fmt::print("{:<{}} {:<16} {:<9} {:>9.1f}\n", j.planned.rendered.name, width, j.planned.key.hex.substr(0, 16),
               j.error.empty() ? (j.report.origin == BuildOrigin::compiled ? "compiled" : "hit") : "FAILED",
               j.report.seconds * 1e3);
  }
  fmt::print("{} kernel(s): {} failed\n", jobs.size(), failed);
  if (!builder.cache().writable()) {  // it fell back to memory while saving (warned above)
    fmt::print(stderr, "megamoe-precompile: the kernel cache {} could not be written: nothing was saved\n",
               builder.cache().root().string());
    return 1;
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  return cli::run_reporting_errors([&] {
    std::vector<int> buckets;
    const Config config = planned_config(args, buckets);
    const BackendKind backend = backend_from_name(args.backend);
    auto compiler = std::shared_ptr<const Compiler>(make_compiler(backend));
    const std::string arch = args.arch.empty() ? compiler->default_arch() : args.arch;
    KernelBuilder builder(compiler, arch, DiskCache::default_root());
    const std::vector<KernelPath> paths = planned_paths(args.path, config, backend, arch);
    // One job per distinct key: buckets that share a kernel compile it once.
    const std::vector<Config> tables = configs_for_tables(config, args.table);
    std::vector<PrecompileJob> jobs =
        plan_precompile(builder, tables, buckets, paths, args.world, args.transport == "nvshmem");
    std::string table_names;
    for (const Config& t : tables)
      table_names += fmt::format("{}{}", table_names.empty() ? "" : "; ", table_name(t.table));
    fmt::print("config {} ({}), {} bucket(s) of {} table(s) ({}), {} distinct kernel(s), {} for {}, cache {}\n",
               config.name, config.source, buckets.size(), tables.size(), table_names, jobs.size(), compiler->identity(),
               arch, builder.cache().enabled() ? builder.cache().root().string() : "disabled");
    for (KernelPath p : paths)  // the kernels of a path that pads run the padded shape
      if (const std::string padded = padding_note(p, config); !padded.empty()) fmt::print("{}\n", padded);
    if (args.list || args.dry_run) {
      print_plan(jobs, builder, args.dry_run);
      return 0;
    }
    if (!cache_can_keep(builder)) return 1;
    return compile_and_report(builder, jobs, args.jobs);
  });
}
