// The nvshmem transport on one GPU: processes of megamoe-run as the ranks of a group on NVSHMEM
// (unique id through the folder all-gather), every rank's output against the references. With
// --node-size 1 every other rank counts as another node, so the counts, the dispatch's rows, the
// flags and Stage2's rows all go by NVSHMEM's puts (the put path a cluster's network carries);
// with nodes of two, half go by load and store and half by puts; node size 0 maps every rank
// (one GPU: load and store, as ipc). Fused and serial; empty and bad ids; unequal token counts.
// NVSHMEM is found as at run time (MEGAMOE_NVSHMEM_DIR; tools/gpu_session.sh sets it).
#include <catch2/catch.hpp>

#include <filesystem>

#include "backend/cuda/nvshmem_library.hpp"
#include "support/test_support.hpp"

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// megamoe-run over `world` processes on GPU 0 with the nvshmem transport; every rank must pass
// every size.
void run_group(int world, int node_size, const std::string& extra, int sizes) {
  const std::filesystem::path run =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "megamoe-run";
  REQUIRE(std::filesystem::exists(run));
  std::string devices = "0";
  for (int r = 1; r < world; ++r) devices += ",0";
  std::string out;
  const int status = megamoe::test::run_command(
      "'" + run.string() + "' --config kimi_k3_a8w4 --experts-per-rank " + std::to_string(224 / world) +
          " --world " + std::to_string(world) + " --transport nvshmem --devices " + devices + " --node-size " +
          std::to_string(node_size) + " --check --ref-tokens 16 " + extra,
      out);
  INFO(out);
  CHECK(status == 0);
  CHECK(count(out, " PASS") == std::size_t(world * sizes));
  CHECK(out.find("FAIL") == std::string::npos);
}

bool nvshmem_here() {
  if (!megamoe::nvshmem_built()) {
    WARN("skipped: this build has no nvshmem transport (NVSHMEM's headers were not found when it was configured)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("nvshmem: two processes on GPU 0, every peer by puts (nodes of one), fused and serial",
          "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  run_group(2, 1, "--taper --bs 1,40,200", 3);
  run_group(2, 1, "--serial --bs 1,40", 2);
}

TEST_CASE("nvshmem: two processes on GPU 0 as one node (load and store through NVSHMEM's mapping)",
          "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  run_group(2, 0, "--bs 1,64", 2);
}

TEST_CASE("nvshmem: four processes on GPU 0 in nodes of two, bad and empty ids, fused and serial",
          "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  run_group(4, 2, "--route bad --bs 1,24", 2);
  run_group(4, 2, "--route holes --serial --bs 24", 1);
}
