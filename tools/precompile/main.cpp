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
#include "jit/kernel_builder.hpp"
#include "jit/precompile.hpp"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

using namespace megamoe;

namespace {

const char* kUsage = R"(usage: megamoe-precompile --config NAME (--bucket N ... | --all) [options]

Compiles the kernels of a config's batch-size buckets into the kernel cache
($MEGAMOE_CACHE_DIR, else $XDG_CACHE_HOME/megamoe, else ~/.cache/megamoe).

  --config NAME    built-in config name, or a path ending in .json
  --buckets-of C   the config's model with config C's bucket table (what megamoe-bench
                   --against C runs)
  --shared-experts N
                   the config's model with N shared experts (what megamoe-run and megamoe-bench
                   --shared-experts N run: the kernels of the model without them, and one that
                   routes every token to them)
  --bucket N       a bucket (power of two, 1..32768); repeatable
  --all            every bucket
  --arch ARCH      target (default: the backend's, sm_90a for cuda)
  --backend B      cuda (default) or hip
  --path P         expert-GEMM kernels: auto (default: what the run time picks for the arch),
                   portable, tensor_core, hopper, or all (those the arch can run)
  --world N        1 (default): the single-GPU layer's kernels; more: those a rank of an
                   expert-parallel group launches (the fused and the serial path's; the same
                   kernels for any N > 1)
  --transport T    with --world N > 1: nvshmem for the nvshmem transport's kernels (linked with
                   NVSHMEM's device library, found as at run time: MEGAMOE_NVSHMEM_DIR); any
                   other transport runs the same kernels as the default
  -j N             parallel compiles (default: all cores)
  --list           list the kernels of each bucket, compile nothing
  --dry-run        say per kernel whether it is cached, compile nothing
  -h, --help       this text
Exit status: 0 when every kernel is cached or compiled, 1 on any failure (and, before compiling,
where nothing would be saved: a cache folder this user cannot write, or MEGAMOE_DISABLE_CACHE=1),
2 on bad usage.
)";

struct Args {
  std::string config, buckets_of, arch, backend = "cuda", path = "auto";
  std::vector<int> buckets;
  bool all = false, list = false, dry_run = false;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  int world = 1;
  int shared = -1;  // --shared-experts (-1: the config's)
  bool nvshmem = false;  // --transport nvshmem
};

constexpr const char* kTool = "megamoe-precompile";
[[noreturn]] void usage_error(const std::string& msg) { cli::usage_error(kTool, msg); }
int parse_int(const std::string& flag, const std::string& v) { return int(cli::parse_int(kTool, flag, v)); }

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&] { return cli::next_value(kTool, argc, argv, i); };
    if (s == "-h" || s == "--help") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (s == "--config") a.config = value();
    else if (s == "--buckets-of") a.buckets_of = value();
    else if (s == "--bucket") a.buckets.push_back(parse_int(s, value()));
    else if (s == "--all") a.all = true;
    else if (s == "--arch") a.arch = value();
    else if (s == "--backend") a.backend = value();
    else if (s == "--path") a.path = value();
    else if (s == "-j") a.jobs = parse_int(s, value());
    else if (s == "--world") a.world = parse_int(s, value());
    else if (s == "--transport") {
      const std::string t = value();
      if (t != "loopback" && t != "peer" && t != "ipc" && t != "nvshmem")
        usage_error("--transport expects loopback, peer, ipc or nvshmem, got '" + t + "'");
      a.nvshmem = t == "nvshmem";
    }
    else if (s == "--shared-experts") {
      a.shared = parse_int(s, value());
      if (a.shared < 0) usage_error("--shared-experts expects a count of at least 0");
    }
    else if (s == "--list") a.list = true;
    else if (s == "--dry-run") a.dry_run = true;
    else usage_error("unknown argument '" + s + "'");
  }
  if (a.config.empty()) usage_error("--config NAME is required");
  if (a.all == !a.buckets.empty()) usage_error("give either --bucket N (one or more) or --all");
  if (a.jobs < 1) usage_error("-j must be at least 1");
  if (a.world < 1 || a.world > kMaxWorld) usage_error("--world expects 1.." + std::to_string(int(kMaxWorld)));
  if (a.nvshmem && a.world < 2) usage_error("--transport nvshmem is for --world N > 1");
  if (a.path != "auto" && a.path != "portable" && a.path != "tensor_core" && a.path != "hopper" && a.path != "all")
    usage_error("--path expects auto, portable, tensor_core, hopper or all, got '" + a.path + "'");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  try {
    Config config = load_config(args.config);
    if (!args.buckets_of.empty()) config = with_buckets_of(config, load_config(args.buckets_of));
    if (args.shared >= 0) config = with_shared_experts(std::move(config), args.shared);
    std::vector<int> buckets = args.buckets;
    if (args.all)
      for (auto& b : config.buckets) buckets.push_back(b.bucket);
    for (int b : buckets) config.bucket(b);  // rejects a size that is no bucket
    if (args.world > 1) config_for_world(config, args.world);  // a world the runtime would refuse, named now

    auto compiler = std::shared_ptr<const Compiler>(make_compiler(backend_from_name(args.backend)));
    std::string arch = args.arch.empty() ? compiler->default_arch() : args.arch;
    KernelBuilder builder(compiler, arch, DiskCache::default_root());

    std::vector<KernelPath> paths;
    BackendKind backend = backend_from_name(args.backend);
    if (args.path == "all") {
      for (KernelPath p : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper})
        if (path_runs(p, config, backend, arch)) paths.push_back(p);
    } else {
      paths.push_back(resolve_path(cli::parse_path("megamoe-precompile", args.path), config, backend, arch));
    }

    // One job per distinct key: buckets that share a kernel compile it once.
    std::vector<PrecompileJob> jobs = plan_precompile(builder, config, buckets, paths, args.world, args.nvshmem);

    fmt::print("config {} ({}), {} bucket(s), {} distinct kernel(s), {} for {}, cache {}\n", config.name,
               config.source, buckets.size(), jobs.size(), compiler->identity(), arch,
               builder.cache().enabled() ? builder.cache().root().string() : "disabled");
    for (KernelPath p : paths)  // the kernels of a path that pads run the padded shape
      if (const std::string padded = padding_note(p, config); !padded.empty()) fmt::print("{}\n", padded);

    std::size_t width = 6;  // the name column: as wide as the longest name
    for (auto& j : jobs) width = std::max(width, j.planned.rendered.name.size());

    if (args.list || args.dry_run) {
      for (auto& j : jobs) {
        std::string state;
        if (args.dry_run) {
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
      return 0;
    }

    // Nothing compiled here would be kept: say so before compiling, not after.
    if (const std::string why = builder.cache().unwritable_reason(); !why.empty()) {
      if (!builder.cache().enabled())
        fmt::print(stderr, "megamoe-precompile: the kernel cache is disabled (MEGAMOE_DISABLE_CACHE=1): nothing "
                           "would be saved\n");
      else
        fmt::print(stderr, "megamoe-precompile: the kernel cache {} is not writable ({}): nothing would be saved; "
                           "set MEGAMOE_CACHE_DIR to a folder this user can write\n",
                   builder.cache().root().string(), why);
      return 1;
    }
    run_precompile(builder, jobs, args.jobs, [&](const PrecompileJob& j, std::size_t done, std::size_t total) {
      fmt::print("[{}/{}] {} {} ({:.1f} ms)\n", done, total,
                 j.error.empty() ? std::string(to_string(j.report.origin)) : "FAILED", j.planned.rendered.name,
                 j.report.seconds * 1e3);
      if (!j.error.empty()) fmt::print("{}\n", j.error);
      std::fflush(stdout);
    });

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
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
