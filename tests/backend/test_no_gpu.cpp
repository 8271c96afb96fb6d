// Where no GPU is present, asking for one says so plainly.
#include <catch2/catch.hpp>

#include "megamoe/device.hpp"
#include "megamoe/errors.hpp"
#include "megamoe/runtime.hpp"

using namespace megamoe;

TEST_CASE("opening a GPU where there is none raises NoGpuError saying so", "[backend]") {
  std::string why;
  if (gpu_available(BackendKind::cuda, &why)) {
    WARN("a GPU is present: the no-GPU message cannot be checked on this machine");
    return;
  }
  CHECK_THAT(why, Catch::Contains("no GPU"));
  CHECK_THROWS_AS(open_device(BackendKind::cuda), NoGpuError);
  CHECK_THROWS_AS(Runtime::create("kimi_k3_a8w4"), NoGpuError);
}
