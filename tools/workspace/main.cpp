// megamoe-workspace: the device memory a rank of the layer takes (Runtime::workspace_bytes, and
// Runtime::weights_bytes for a model's layers), before anything is created: no GPU needed.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "config/path_requirements.hpp"
#include "common/cli.hpp"
#include "common/workload.hpp"
#include "common/kernel_limits.hpp"
#include "megamoe/config.hpp"
#include "megamoe/runtime.hpp"

using namespace megamoe;

namespace {

constexpr const char* kTool = "megamoe-workspace";

struct Args {
  std::string config, arch = "sm_90a", transport = "loopback", bucket_table;
  KernelPath path = KernelPath::automatic;
  int world = 1, max_tokens = 8192, experts_per_rank = 0, shared = -1, layers = 1, node_size = 0;
  long long capacity = 0;
  bool table = false, no_fp8_resident = false;
  bool nvshmem() const { return transport == "nvshmem"; }
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app;
  cli::describe(app, kTool,
                "Prints the device memory one rank of the layer takes, as Runtime::workspace_bytes and "
                "Runtime::weights_bytes state it before creation (no GPU needed): the layer's buffers, and over "
                "several ranks the symmetric region and the rank's plan of a call; then one layer's expert weights "
                "on the rank, and the total of a model whose MoE layers share the runtime (one workspace, a set of "
                "weights a layer).",
                "Exit status: 0, 1 for options the runtime would refuse (the message names them), 2 on bad usage.");
  auto* config = cli::add_config(app, a.config);
  app.add_option("--world", a.world, "ranks in the group")->type_name("N")->check(cli::in_range(1, kMaxWorld));
  app.add_option("--max-tokens", a.max_tokens, "the most tokens a call passes")->type_name("T")->check(cli::at_least(1));
  app.add_option("--capacity", a.capacity,
                 "routed_rows_capacity: rows a rank holds (0: the worst case, world x max_tokens x topk)")
      ->type_name("R")->check(cli::at_least(0, "a count of rows"));
  cli::add_experts_per_rank(app, a.experts_per_rank, 0);
  app.add_option("--shared-experts", a.shared, "the model with S shared experts in the call (-1: the config's)")
      ->type_name("S")->check(cli::at_least(-1));
  cli::add_path(app, a.path);
  app.add_option("--arch", a.arch, "the GPU `auto` resolves for")->type_name("ARCH");
  app.add_flag("--no-fp8-resident", a.no_fp8_resident, "RuntimeOptions::fp8_resident_weights = false");
  app.add_option("--layers", a.layers, "the model's MoE layers sharing the runtime")->type_name("L")->check(cli::at_least(1));
  app.add_option("--transport", a.transport,
                 "with --world > 1: nvshmem over nodes (--node-size) adds its relay, staging areas and outbox "
                 "(docs/ep.md, \"Over nodes: NVSHMEM\"); the others, and nvshmem on one node, take the same")
      ->type_name("T")->check(cli::one_of({"loopback", "peer", "ipc", "nvshmem"}));
  app.add_option("--node-size", a.node_size,
                 "with --transport nvshmem: the ranks of a node (a divisor of --world; 0: the whole group on one node)")
      ->type_name("N")->check(cli::at_least(0));
  cli::add_bucket_table(app, a.bucket_table,
                        "the config's default (no GPU here names the card: name it for its weights' bytes, which "
                        "count the fp8-resident copy where a bucket of that table reads it)");
  auto* table = app.add_flag("--table", a.table,
                             "every built-in model at worlds 1, 2, 4 and 8 where they divide its experts: the routed "
                             "rows and bytes at the worst case, and at a capacity of twice the mean "
                             "(2 x max_tokens x topk)");
  config->excludes(table);
  cli::parse(app, argc, argv);
  if (a.table == !a.config.empty()) cli::usage_error(kTool, "give --config NAME or --table");
  if (a.node_size != 0 && !a.nvshmem()) cli::usage_error(kTool, "--node-size is for --transport nvshmem");
  if (a.node_size > 0 && a.world % a.node_size)
    cli::usage_error(kTool, fmt::format("--node-size expects 0 or a divisor of --world = {}, got {}", a.world,
                                        a.node_size));
  return a;
}

std::string gib(std::size_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / double(1ull << 30)); }

void print_one(const Args& a) {
  RuntimeOptions o;
  o.world = a.world, o.max_tokens = a.max_tokens, o.routed_rows_capacity = a.capacity;
  o.path = a.path, o.fp8_resident_weights = !a.no_fp8_resident;
  o.bucket_table = a.bucket_table;
  if (a.nvshmem()) o.transport = Transport::nvshmem, o.node_size = a.node_size;
  Config config = workload::load_for_world(a.config, a.world, a.experts_per_rank);
  if (a.shared >= 0) config = with_shared_experts(std::move(config), a.shared);
  const WorkspaceBytes b = Runtime::workspace_bytes(config, o, a.arch);
  fmt::print("config {}, world {}, max_tokens {}, path {} ({}), {} routed rows a rank{}\n", config.name, a.world,
             a.max_tokens, a.path == KernelPath::automatic ? "auto" : to_string(a.path), a.arch, b.routed_rows, a.capacity > 0 || a.world == 1 ? "" : " (the worst case)");
  const KernelPath path = resolve_path(o.path, config, BackendKind::cuda, a.arch);
  if (const std::string padded = padding_note(path, config); !padded.empty()) fmt::print("  {}\n", padded);
  fmt::print("  layer            {:>15} bytes  {}\n", b.layer, gib(b.layer));
  if (a.world > 1) {
    fmt::print("  symmetric region {:>15} bytes  {}\n", b.symmetric_region, gib(b.symmetric_region));
    fmt::print("  group plan       {:>15} bytes  {}\n", b.group_plan, gib(b.group_plan));
  }
  fmt::print("  total            {:>15} bytes  {}\n", b.total(), gib(b.total()));
  const std::size_t weights = Runtime::weights_bytes(config, o, a.arch);
  fmt::print("weights of one layer on the rank {:>15} bytes  {}\n", weights, gib(weights));
  const std::size_t model = b.total() + std::size_t(a.layers) * weights;
  fmt::print("{} layer(s) through one runtime   {:>15} bytes  {} (the workspace once, the weights {} times)\n", a.layers,
             model, gib(model), a.layers);
}

void print_table(const Args& a) {
  fmt::print("max_tokens {} a rank, path auto on {}; rows and GiB a rank beside the weights\n", a.max_tokens, a.arch);
  fmt::print("| model | world | worst-case rows | GiB | 2 x mean rows | GiB |\n|---|---|---|---|---|---|\n");
  for (const std::string& name : builtin_config_names()) {
    const Config config = load_config(name);
    for (int world : {1, 2, 4, 8}) {
      if (config.model.experts % world) continue;
      RuntimeOptions o;
      o.world = world, o.max_tokens = a.max_tokens;
      const WorkspaceBytes worst = Runtime::workspace_bytes(config, o, a.arch);
      if (world == 1) {  // one GPU holds every routed row: no capacity to set
        fmt::print("| {} | 1 | {} | {:.2f} | - | - |\n", name, worst.routed_rows,
                   double(worst.total()) / double(1ull << 30));
        continue;
      }
      o.routed_rows_capacity = 2LL * a.max_tokens * config.model.topk;
      const WorkspaceBytes twice = Runtime::workspace_bytes(config, o, a.arch);
      fmt::print("| {} | {} | {} | {:.2f} | {} | {:.2f} |\n", name, world, worst.routed_rows,
                 double(worst.total()) / double(1ull << 30), twice.routed_rows,
                 double(twice.total()) / double(1ull << 30));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  return cli::run_reporting_errors([&] {
    if (args.table) print_table(args);
    else print_one(args);
    return 0;
  });
}
