// Races: many threads of one process compile a key once; many processes compiling the same
// kernels into one cache folder at once end with one valid entry per kernel.
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <thread>
#include <set>
#include <fcntl.h>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "jit/kernel_builder.hpp"
#include "support/test_support.hpp"

extern char** environ;

using namespace megamoe;
namespace fs = std::filesystem;

TEST_CASE("threads asking for one kernel compile it once", "[jit][race]") {
  test::TempDir dir;
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", dir.path());
  KernelSpec s = combine_spec(CombineWire::bf16);
  std::vector<BuildReport> reports(8);
  std::vector<std::thread> threads;
  for (auto& r : reports) threads.emplace_back([&] { r = b.build(s); });
  for (auto& t : threads) t.join();
  int compiled = 0;
  for (auto& r : reports) {
    compiled += r.origin == BuildOrigin::compiled;
    CHECK(r.kernel == reports[0].kernel);  // the same object, built once
  }
  CHECK(compiled == 1);
}

TEST_CASE("processes racing on one cache folder leave one valid entry per kernel", "[jit][race]") {
  test::TempDir dir;
  std::string env_dir = "MEGAMOE_CACHE_DIR=" + dir.path().string();
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("MEGAMOE_", 0) != 0) env.push_back(*e);
  env.push_back(env_dir.data());
  env.push_back(nullptr);

  const int kProcesses = 6;
  std::vector<pid_t> pids;
  std::vector<std::string> args = {MEGAMOE_PRECOMPILE_EXE, "--config", "generic_a8w4", "--all", "-j", "4"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  for (int i = 0; i < kProcesses; ++i) {
    pid_t pid;
    REQUIRE(posix_spawn(&pid, argv[0], &quiet, nullptr, argv.data(), env.data()) == 0);
    pids.push_back(pid);
  }
  posix_spawn_file_actions_destroy(&quiet);
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  // Every kernel has exactly one entry, intact, and no temp folder is left behind.
  test::ScopedEnv no_bc("MEGAMOE_BOUNDS_CHECK", std::nullopt);
  test::ScopedEnv no_cfg("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config config = load_config("generic_a8w4");
  KernelBuilder reader(make_compiler(BackendKind::cuda), "sm_90a", dir.path());
  std::set<std::string> expected;
  for (auto& bucket : config.buckets)
    for (auto& spec : kernels_for_bucket(config, bucket, resolve_path(KernelPath::automatic, config,
                                                                       BackendKind::cuda, "sm_90a"))) {
      PlannedKernel p = reader.plan(spec);
      expected.insert(p.key.entry_name());
      CHECK(reader.build(p).origin != BuildOrigin::compiled);
    }
  std::set<std::string> found;
  for (auto& e : fs::directory_iterator(dir.path() / "v1"))
    if (e.path().filename().string()[0] != '.') found.insert(e.path().filename().string());
  CHECK(found == expected);
  std::size_t leftovers = 0;
  if (fs::exists(dir.path() / "v1" / ".tmp"))
    for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path() / "v1" / ".tmp")) ++leftovers;
  CHECK(leftovers == 0);
  CHECK_FALSE(fs::exists(dir.path() / "v1" / ".corrupt"));
}
