// The nvshmem transport's kernels without a GPU: NVRTC compiles them to LTO-IR and nvJitLink links
// them with the device shim and NVSHMEM's device library for sm_90a, on each path; each cubin
// holds NVSHMEM's device state (what nvshmemx_cumodule_init sets), and their cache keys differ
// from the other transports' kernels. Said to be skipped where this build has no nvshmem transport.
#include <catch2/catch.hpp>

#include <set>

#include "backend/cuda/nvshmem_library.hpp"
#include "codegen/layer_kernels.hpp"
#include "jit/kernel_builder.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("the nvshmem transport's kernels compile and link with NVSHMEM's device library for sm_90a",
          "[nvrtc][nvshmem]") {
  if (!nvshmem_built()) {
    WARN("skipped: this build has no nvshmem transport (NVSHMEM's headers were not found when it was configured)");
    return;
  }
  test::ScopedEnv no_cfg("MEGAMOE_CONFIG_DIR", std::nullopt);
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", {});  // memory only: always compiles
  const Config c = config_for_world(load_config("kimi_k3_a8w4"), 2);
  std::set<std::string> linked;
  for (KernelPath path : {KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper}) {
    const BucketConfig& bucket = c.bucket(128);
    const std::vector<KernelSpec> plain = kernels_for_bucket(c, bucket, path, 2, false);
    std::set<std::string> plain_keys;
    for (const KernelSpec& s : plain) plain_keys.insert(b.plan(s).key.hex);
    for (const KernelSpec& spec : kernels_for_bucket(c, bucket, path, 2, true)) {
      if (!spec.nvshmem) continue;
      PlannedKernel p = b.plan(spec);
      INFO(p.rendered.name);
      CHECK(plain_keys.count(p.key.hex) == 0);
      if (!linked.insert(p.key.hex).second) continue;
      BuildReport r = b.build(p);
      CHECK(r.kernel->binary.substr(0, 4) == "\x7f" "ELF");
      CHECK(r.kernel->binary.find("nvshmemi_device_state") != std::string::npos);  // NVSHMEM's device library in it
    }
  }
  // route_ep and node_reduce_ep once; dispatch_ep (its x scale blocks differ) and Stage1 with the
  // dispatch on each of three paths.
  CHECK(linked.size() == 8);
}

TEST_CASE("node_reduce_ep links, and combine with the nodes' sums compiles, for both combine wires",
          "[nvrtc][nvshmem]") {
  if (!nvshmem_built()) {
    WARN("skipped: this build has no nvshmem transport");
    return;
  }
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", {});
  for (CombineWire w : {CombineWire::bf16, CombineWire::fp8_blockwise_1x32}) {
    BuildReport r = b.build(node_reduce_ep_spec(w));
    CHECK(r.kernel->binary.find("nvshmemi_device_state") != std::string::npos);
    PlannedKernel with = b.plan(combine_ep_spec(w, true)), without = b.plan(combine_ep_spec(w, false));
    CHECK(with.key.hex != without.key.hex);
    CHECK(b.build(with).kernel->binary.substr(0, 4) == "\x7f" "ELF");
  }
}

TEST_CASE("Kimi-K3 at EP32 in nodes of 8: a rank's kernels compile and link for sm_90a, route_ep at 32 ranks",
          "[nvrtc][nvshmem]") {
  if (!nvshmem_built()) {
    WARN("skipped: this build has no nvshmem transport");
    return;
  }
  test::ScopedEnv no_cfg("MEGAMOE_CONFIG_DIR", std::nullopt);
  KernelBuilder b(make_compiler(BackendKind::cuda), "sm_90a", {});
  const Config c = config_for_world(load_config("kimi_k3_a8w4"), 32);
  REQUIRE(c.model.experts_per_rank == 28);
  int routes = 0;
  for (const KernelSpec& spec : kernels_for_bucket(c, c.bucket(128), KernelPath::hopper, 32, true)) {
    PlannedKernel p = b.plan(spec);
    INFO(p.rendered.name);
    if (spec.family == "route_ep") {
      ++routes;
      CHECK(p.rendered.name == "megamoe_route_ep_w32_shmem");
    }
    CHECK(b.build(p).kernel->binary.substr(0, 4) == "\x7f" "ELF");
  }
  CHECK(routes == 1);
  // Up to 16 ranks the route kernel keeps its narrower per-thread counts.
  CHECK(b.plan(route_ep_spec(16)).rendered.name == "megamoe_route_ep");
}
