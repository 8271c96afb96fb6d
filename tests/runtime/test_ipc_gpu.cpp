// The ipc transport on one GPU: two processes each allocate a buffer, exchange handles through
// the built-in bootstrap, map the other's buffer, and read and write it with copies; and the layer
// over two processes (megamoe-run --transport ipc --devices 0,0), whose spin waits end because
// the GPU gives each process's kernels slices of time (without MPS it runs one process's at a
// time). Unlike loopback ranks, ipc ranks launch each kernel early (programmatic dependent launch).
// And a rank killed mid-call: the other's call ends in PeerTimeoutError within its bound.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/test_config_variants.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
constexpr std::size_t kBytes = 1 << 20;
std::uint8_t pattern(int rank, std::size_t i) { return std::uint8_t(rank * 101 + i * 7 + (i >> 9)); }
}  // namespace

// A child: megamoe_gpu_tests --ipc-child RANK DIR. Exit 0 when the peer's buffer read as the
// peer wrote it, and this buffer's second half holds what the peer wrote into it.
int ipc_child(int argc, char** argv) {
  if (argc != 4) return 2;
  const int rank = std::stoi(argv[2]), peer = 1 - rank;
  try {
    auto dev = open_device(BackendKind::cuda, 0);
    AllGather gather = folder_all_gather(argv[3], rank, 2, 30000);
    DeviceBuffer mine(*dev, kBytes);
    std::vector<std::uint8_t> host(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) host[i] = pattern(rank, i);
    dev->copy_to_device(mine.get(), host.data(), kBytes);
    const std::string handle = dev->ipc_handle(mine.get());
    const std::vector<std::uint8_t> all = gather(std::vector<std::uint8_t>(handle.begin(), handle.end()));
    void* theirs = dev->open_ipc_handle(
        std::string(reinterpret_cast<const char*>(all.data()) + peer * handle.size(), handle.size()));
    std::vector<std::uint8_t> got(kBytes);
    dev->copy_to_host(got.data(), theirs, kBytes);  // the peer's first half is still its pattern
    for (std::size_t i = 0; i < kBytes / 2; ++i)
      if (got[i] != pattern(peer, i)) return 10;
    // Write into the second half of the peer's buffer, then meet.
    for (std::size_t i = kBytes / 2; i < kBytes; ++i) host[i] = pattern(10 + rank, i);
    dev->copy_to_device(static_cast<std::uint8_t*>(theirs) + kBytes / 2, host.data() + kBytes / 2, kBytes / 2);
    dev->synchronize(nullptr);
    gather({1});
    dev->copy_to_host(got.data(), mine.get(), kBytes);
    for (std::size_t i = kBytes / 2; i < kBytes; ++i)
      if (got[i] != pattern(10 + peer, i)) return 11;
    gather({2});  // neither unmaps before the other has read
    dev->close_ipc_handle(theirs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc child %d: %s\n", rank, e.what());
    return 12;
  }
}

TEST_CASE("ipc: two processes on one GPU map each other's buffers and move data", "[gpu][ep][ipc]") {
  test::TempDir dir;
  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string r = std::to_string(rank), d = dir.path().string();
      execl("/proc/self/exe", "megamoe_gpu_tests", "--ipc-child", r.c_str(), d.c_str(), (char*)nullptr);
      _exit(127);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

TEST_CASE("ipc: two processes on GPU 0 run the layer as a group of two, fused and serial, launched as an engine "
          "launches",
          "[gpu][ep][ipc]") {
  const std::filesystem::path run = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() /
                                    "megamoe-run";
  REQUIRE(std::filesystem::exists(run));
  // --taper: rank 1 gets half of rank 0's tokens (0 at bs 1). The fused path, then the serial one.
  for (const char* serial : {"", " --serial"}) {
    std::string out;
    const int status = test::run_command("'" + run.string() +
                                             "' --config kimi_k3_a8w4 --experts-per-rank 112 --world 2 --transport ipc --devices 0,0 "
                                             "--check --taper --bs 1,40,200 --ref-tokens 24" + serial,
                                         out);
    INFO(out);
    CHECK(status == 0);
    std::size_t passes = 0;
    for (std::size_t at = out.find(" PASS"); at != std::string::npos; at = out.find(" PASS", at + 1)) ++passes;
    CHECK(passes == 6);  // 3 sizes x 2 ranks
    CHECK(out.find("FAIL") == std::string::npos);
  }
}

namespace {
constexpr int kLostTimeoutMs = 2000;

// Holds `stream` for a minute with a host function (cuLaunchHostFunc, looked up in the driver), so
// that a call launched behind it has certainly not run when its process is killed. False where the
// driver has no such entry.
bool hold_stream(StreamHandle stream) {
  using HostFn = void (*)(void*);
  using LaunchHostFunc = int (*)(void*, HostFn, void*);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
  auto launch = lib ? reinterpret_cast<LaunchHostFunc>(dlsym(lib, "cuLaunchHostFunc")) : nullptr;
  if (launch == nullptr) return false;
  return launch(stream, [](void*) { std::this_thread::sleep_for(std::chrono::seconds(60)); }, nullptr) == 0;
}
}  // namespace

// A child: megamoe_gpu_tests --ipc-lost-child RANK DIR CONFIG [nvshmem]. Both ranks make their
// runtime (ipc, or nvshmem with nodes of one rank: every peer by puts) and weights and meet; both
// call; rank 1 launches its call behind a held stream (so none of its kernels has run) and is
// then killed (SIGKILL). Rank 0 exits 0 when take_errors() raised PeerTimeoutError naming rank 1
// within the bound (and a slack for the GPU's time slices between the two processes).
int ipc_lost_child(int argc, char** argv) {
  if (argc != 5 && argc != 6) return 2;
  const int rank = std::stoi(argv[2]);
  try {
    AllGather gather = folder_all_gather(argv[3], rank, 2, 120000);
    RuntimeOptions o;
    o.world = 2, o.rank = rank, o.transport = Transport::ipc, o.device = 0;
    if (argc == 6 && std::string(argv[5]) == "nvshmem") o.transport = Transport::nvshmem, o.node_size = 1;
    o.max_tokens = 64, o.timeout_ms = kLostTimeoutMs;
    o.all_gather = gather;  // the same rounds: this process's later gathers follow the runtime's
    auto rt = Runtime::create(argv[4], o);
    const ModelShape& m = rt->config().model;
    const auto weights = rt->prepare_weights(workload::slice_experts(
        workload::random_group_weights(m, 2, 5), rank * m.experts_per_rank, m.experts_per_rank));
    std::mt19937_64 rng(77 + rank);
    const int tokens = 16;
    const workload::Routing routing = workload::make_routing("uniform", tokens, m.topk, 2 * m.experts_per_rank, rng);
    const std::vector<std::uint16_t> x = workload::random_bf16(tokens, m.model_dim, rng);
    Device& dev = rt->device();
    DeviceBuffer x_d(dev, x.size() * 2), y_d(dev, x.size() * 2), ids_d(dev, routing.ids.size() * 4),
        w_d(dev, routing.weights.size() * 4);
    dev.copy_to_device(x_d.get(), x.data(), x.size() * 2);
    dev.copy_to_device(ids_d.get(), routing.ids.data(), routing.ids.size() * 4);
    dev.copy_to_device(w_d.get(), routing.weights.data(), routing.weights.size() * 4);
    StreamHandle stream = dev.create_stream();
    if (rank == 1 && !hold_stream(stream)) return 13;
    gather({1});  // both ready
    const auto t0 = std::chrono::steady_clock::now();
    rt->forward(*weights, x_d.get(), static_cast<const int*>(ids_d.get()), static_cast<const float*>(w_d.get()),
                y_d.get(), tokens, stream);
    if (rank == 1) kill(getpid(), SIGKILL);  // mid-call: launched, not yet run
    try {
      rt->take_errors();
      std::fprintf(stderr, "lost-peer child 0: the call ended without an error\n");
      return 20;
    } catch (const PeerTimeoutError& e) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "lost-peer child 0: %s (after %.2f s)\n", e.what(), waited);
      if (e.peer != 1) return 21;
      return waited < 4.0 * kLostTimeoutMs / 1000.0 + 2.0 ? 0 : 22;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lost-peer child %d: %s\n", rank, e.what());
    return 12;
  }
}

namespace megamoe::test {
// The lost-peer children over `transport` ("ipc" or "nvshmem"), checked (the nvshmem suite too).
void lost_peer_case(const std::string& transport);
}  // namespace megamoe::test

TEST_CASE("ipc: a rank killed mid-call ends the other's call in PeerTimeoutError within the bound; nothing hangs",
          "[gpu][ep][ipc]") {
  test::lost_peer_case("ipc");
}

void megamoe::test::lost_peer_case(const std::string& transport) {
  test::TempDir dir;
  const std::string config = test::write_config_variant(dir.path(), "small_x256_partial");
  const std::string boot = (dir.path() / "boot").string();
  // Both end within 120 s (creation and weights included), or they are killed and the test fails.
  const auto ends = test::run_children({{"--ipc-lost-child", "0", boot, config, transport},
                                        {"--ipc-lost-child", "1", boot, config, transport}},
                                       120);
  REQUIRE_FALSE(ends[0].hung);  // rank 0 did not hang
  CHECK(ends[0].code == 0);     // PeerTimeoutError naming rank 1, within the bound
  CHECK_FALSE(ends[1].hung);
  CHECK(ends[1].signal == SIGKILL);
}
