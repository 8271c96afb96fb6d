// The GPU suite's main: where no GPU is present every test says so and exits 77, which ctest
// reports as skipped (never as passed). `--write-configs DIR` (no GPU needed) writes the configs
// the suite runs besides the built-in ones, so that their kernels can be precompiled.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "megamoe/device.hpp"
#include "runtime/test_config_variants.hpp"

int ipc_child(int argc, char** argv);       // runtime/test_ipc_gpu.cpp
int ipc_lost_child(int argc, char** argv);  // runtime/test_ipc_gpu.cpp
int nvshmem_burst_child(int argc, char** argv);  // runtime/test_nvshmem_gpu.cpp

int main(int argc, char** argv) {
  // Loopback ranks each launch on their own stream: enough hardware queues that no rank's kernel
  // waits in a queue behind another rank's (docs/ep.md). Read when the first context is made.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (argc >= 2 && std::string(argv[1]) == "--ipc-child") return ipc_child(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "--ipc-lost-child") return ipc_lost_child(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "--nvshmem-burst-child") return nvshmem_burst_child(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--write-configs") {
    megamoe::test::write_config_variants(argv[2]);
    for (const auto& v : megamoe::test::config_variants()) std::printf("%s/%s.json\n", argv[2], v.name.c_str());
    return 0;
  }
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::string(argv[i]).rfind("--list", 0) == 0;
  std::string why;
  if (!listing && !megamoe::gpu_available(megamoe::BackendKind::cuda, &why)) {
    std::printf("skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
