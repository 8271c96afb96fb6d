// The nvshmem transport on one GPU: processes of megamoe-run as the ranks of a group on NVSHMEM
// (unique id through the folder all-gather), every rank's output against the references. With
// --node-size 1 every other rank counts as another node, so the counts, the dispatch's rows, the
// flags, the node's summed rows all go by NVSHMEM's puts (the put path a cluster's network
// carries); with nodes of two, the rows of the other node go to one rank there by puts and are
// forwarded and summed there by load and store; node size 0 maps every rank
// (one GPU: load and store, as ipc). Fused and serial; empty and bad ids; unequal token counts;
// calls back to back with no host sync and a captured call replayed, each the bits of the same
// call made alone; a rank killed mid-call. NVSHMEM is found as at run time (MEGAMOE_NVSHMEM_DIR;
// tools/gpu_session.sh sets it).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <random>

#include "backend/cuda/nvshmem_library.hpp"
#include "common/workload.hpp"
#include "megamoe/megamoe.hpp"
#include "runtime/layer_outputs.hpp"
#include "runtime/test_config_variants.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace megamoe::test {
void lost_peer_case(const std::string& transport);  // runtime/test_ipc_gpu.cpp
}

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// megamoe-run over `world` processes on GPU 0 with the nvshmem transport; every rank must pass
// every size.
void run_group(int world, int node_size, const std::string& extra, int sizes,
               const std::string& config = "kimi_k3_a8w4") {
  const std::filesystem::path run =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "megamoe-run";
  REQUIRE(std::filesystem::exists(run));
  std::string devices = "0";
  for (int r = 1; r < world; ++r) devices += ",0";
  std::string out;
  const int status = test::run_command(
      "'" + run.string() + "' --config " + config + " --experts-per-rank " + std::to_string(224 / world) +
          " --world " + std::to_string(world) + " --transport nvshmem --devices " + devices + " --node-size " +
          std::to_string(node_size) + " --check --ref-tokens 16 " + extra,
      out);
  INFO(out);
  CHECK(status == 0);
  CHECK(count(out, " PASS") == std::size_t(world * sizes));
  CHECK(out.find("FAIL") == std::string::npos);
}

bool nvshmem_here() {
  if (!nvshmem_built()) {
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

// Nodes of two: a token's row crosses to the other node once, to one of the ranks it goes to
// there, which forwards it to the other and sums what the node's slots give it (the references
// follow that sum, rounded to bf16, where the node's first slot is).
TEST_CASE("nvshmem: four processes on GPU 0 in nodes of two, forwarded and summed in the node: unequal counts, "
          "massive and outlier inputs, the fp8 wire",
          "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  run_group(4, 2, "--taper --inputs massive --bs 1,40,160", 3);
  run_group(4, 2, "--inputs outliers --serial --bs 64", 1);
  test::TempDir dir;
  run_group(4, 2, "--bs 48", 1, test::write_config_variant(dir.path(), "kimi_fp8wire"));
}

TEST_CASE("nvshmem: four processes on GPU 0, nodes of one (every peer a node of its own)", "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  run_group(4, 1, "--route zipf --bs 32", 1);
}

// A child: megamoe_gpu_tests --nvshmem-burst-child RANK DIR CONFIG. Two ranks on NVSHMEM, nodes
// of one rank (every peer by puts): three calls each waited for, the same three back to back with
// no host sync, then a captured call replayed twice on new inputs, each beside the same call made
// directly. Exits 0 where every call of the burst and every replay gave the bits of its call made
// alone, and no call reported an error; both ranks make the same calls in the same order.
int nvshmem_burst_child(int argc, char** argv) {
  if (argc != 5) return 2;
  const int rank = std::stoi(argv[2]);
  try {
    RuntimeOptions o;
    o.world = 2, o.rank = rank, o.transport = Transport::nvshmem, o.node_size = 1, o.device = 0;
    o.max_tokens = 64, o.timeout_ms = 20000;
    o.all_gather = folder_all_gather(argv[3], rank, 2, 120000);
    auto rt = Runtime::create(argv[4], o);
    const ModelShape& m = rt->config().model;
    const auto weights = rt->prepare_weights(workload::slice_experts(
        workload::random_group_weights(m, 2, 5), rank * m.experts_per_rank, m.experts_per_rank));
    Device& dev = rt->device();
    std::mt19937_64 rng(91 + rank);
    std::vector<test::CallBuffers> calls;
    std::vector<std::int64_t> tokens = {16, 40 - 8 * rank, 64};
    for (std::int64_t t : tokens)
      calls.push_back(test::upload_call(dev, workload::random_bf16(t, m.model_dim, rng),
                                        workload::make_routing("holes", t, m.topk, 2 * m.experts_per_rank, rng)));
    StreamHandle s = dev.create_stream();
    auto call = [&](test::CallBuffers& c, std::int64_t t, void* y) {
      rt->forward(*weights, c.x.get(), static_cast<const int*>(c.ids.get()), static_cast<const float*>(c.weights.get()),
                  y, t, s);
    };
    auto bytes = [&](const DeviceBuffer& b) {
      std::vector<std::uint8_t> v(b.bytes());
      dev.copy_to_host(v.data(), b.get(), v.size());
      return v;
    };
    std::vector<std::vector<std::uint8_t>> alone;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      call(calls[i], tokens[i], calls[i].y.get());
      dev.synchronize(s);
      alone.push_back(bytes(calls[i].y));
      dev.fill_bytes(calls[i].y.get(), 0xFF, calls[i].y.bytes());
    }
    for (std::size_t i = 0; i < calls.size(); ++i) call(calls[i], tokens[i], calls[i].y.get());  // no sync between
    dev.synchronize(s);
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (bytes(calls[i].y) != alone[i]) {
        std::fprintf(stderr, "nvshmem burst child %d: call %zu of the burst differs from the call made alone\n", rank, i);
        return 30;
      }
    test::CallBuffers& c = calls[2];
    DeviceBuffer direct(dev, c.y.bytes());
    rt->prepare(tokens[2]);
    dev.begin_capture(s);
    call(c, tokens[2], c.y.get());
    GraphHandle g = dev.end_capture(s);
    for (int replay = 0; replay < 2; ++replay) {
      const std::vector<std::uint16_t> x = workload::random_bf16(tokens[2], m.model_dim, rng);
      dev.copy_to_device(c.x.get(), x.data(), x.size() * 2);
      dev.fill_bytes(c.y.get(), 0xFF, c.y.bytes());
      dev.launch_graph(g, s);
      call(c, tokens[2], direct.get());
      dev.synchronize(s);
      if (bytes(c.y) != bytes(direct)) {
        std::fprintf(stderr, "nvshmem burst child %d: replay %d differs from the direct call\n", rank, replay);
        return 31;
      }
    }
    dev.destroy_graph(g);
    if (rt->take_errors().bounds_violations) return 32;
    dev.destroy_stream(s);
    std::fprintf(stderr, "nvshmem burst child %d: 3 calls back to back and 2 replays, each the bits of its call alone\n",
                 rank);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvshmem burst child %d: %s\n", rank, e.what());
    return 12;
  }
}

TEST_CASE("nvshmem: calls back to back with no host sync and graph replays give the bits of single calls",
          "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  test::TempDir dir;
  const std::string config = test::write_config_variant(dir.path(), "small_x256_partial");
  const std::string boot = (dir.path() / "boot").string();
  const auto ends = test::run_children({{"--nvshmem-burst-child", "0", boot, config},
                                        {"--nvshmem-burst-child", "1", boot, config}},
                                       150);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK_FALSE(ends[r].hung);
    CHECK(ends[r].code == 0);
  }
}

TEST_CASE("nvshmem: a rank killed mid-call ends the other's call in PeerTimeoutError within the bound",
          "[gpu][ep][nvshmem]") {
  if (!nvshmem_here()) return;
  test::lost_peer_case("nvshmem");
}
