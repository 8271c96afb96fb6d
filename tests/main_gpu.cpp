// The GPU suite's main: where no GPU is present every test says so and exits 77, which ctest
// reports as skipped (never as passed).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "megamoe/device.hpp"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::string(argv[i]).rfind("--list", 0) == 0;
  std::string why;
  if (!listing && !megamoe::gpu_available(megamoe::BackendKind::cuda, &why)) {
    std::printf("skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
