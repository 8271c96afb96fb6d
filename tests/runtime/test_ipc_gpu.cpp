// The ipc transport on one GPU: two processes each allocate a buffer, exchange handles through
// the built-in bootstrap, map the other's buffer, and read and write it with copies; and the layer
// over two processes (megamoe-run --transport ipc --devices 0,0), whose spin waits end because
// the GPU gives each process's kernels slices of time (without MPS it runs one process's at a
// time). Unlike loopback ranks, ipc ranks launch each kernel early (programmatic dependent launch).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "megamoe/megamoe.hpp"
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
                                             "' --config kimi_k3_a8w4 --world 2 --transport ipc --devices 0,0 --check "
                                             "--taper --bs 1,40,200 --ref-tokens 24" + serial,
                                         out);
    INFO(out);
    CHECK(status == 0);
    std::size_t passes = 0;
    for (std::size_t at = out.find(" PASS"); at != std::string::npos; at = out.find(" PASS", at + 1)) ++passes;
    CHECK(passes == 6);  // 3 sizes x 2 ranks
    CHECK(out.find("FAIL") == std::string::npos);
  }
}
