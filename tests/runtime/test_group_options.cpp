// Runtime::create_ranks refuses a group it cannot make before it opens a GPU, naming the option.
#include <catch2/catch.hpp>

#include "megamoe/megamoe.hpp"

using namespace megamoe;

TEST_CASE("create_ranks names a bad world, device list or transport before opening a GPU", "[ep][runtime]") {
  RuntimeOptions o;
  o.world = 0;
  CHECK_THROWS_WITH(Runtime::create_ranks("kimi_k3_a8w4", o), Catch::Contains("RuntimeOptions.world = 0"));
  o.world = 2;
  o.transport = Transport::peer;
  o.devices = {0, 1, 2};
  CHECK_THROWS_WITH(Runtime::create_ranks("kimi_k3_a8w4", o), Catch::Contains("devices has 3 entries, expected world = 2"));
  o.devices = {1, 1};
  CHECK_THROWS_WITH(Runtime::create_ranks("kimi_k3_a8w4", o), Catch::Contains("names GPU 1 for ranks 0 and 1"));
  o.transport = Transport::ipc;
  CHECK_THROWS_WITH(Runtime::create_ranks("kimi_k3_a8w4", o), Catch::Contains("each process calls Runtime::create"));
  o.transport = Transport::loopback, o.devices = {}, o.world = 32;  // a queue a rank, and CUDA has 32
  CHECK_THROWS_WITH(Runtime::create_ranks("kimi_k3_a8w4", o), Catch::Contains("at most 31 loopback ranks"));
}
