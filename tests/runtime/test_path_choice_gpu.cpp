// On the GPU: a model off the faster paths' 128 grid runs the portable path, and the runtime says
// why once (a warning and Runtime::path_choice()); a path asked for that cannot run is refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "jit/diagnostics.hpp"
#include "megamoe/megamoe.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("automatic names the reason it runs a slower path than the GPU's fastest, once", "[gpu][runtime]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config off_grid = load_config("generic_a8w4");
  off_grid.name = "off_grid_320";
  off_grid.model = ModelShape{.experts = 4, .model_dim = 320, .inter_dim = 192, .topk = 2};
  RuntimeOptions o;
  o.max_tokens = 64;

  std::vector<std::string> said;
  WarningHandler old = set_warning_handler([&](const std::string& m) { said.push_back(m); });
  auto first = Runtime::create(off_grid, o);
  auto second = Runtime::create(off_grid, o);
  set_warning_handler(old);

  const std::string arch = first->device().arch();
  const PathChoice& c = first->path_choice();
  CHECK(c.path == KernelPath::portable);
  CHECK(first->path() == KernelPath::portable);
  if (arch == "sm_90a" || arch.starts_with("sm_89") || arch.starts_with("sm_1")) {
    // A GPU with a faster path: the note names the config, the path and the shape's fault.
    CHECK_THAT(c.note, Catch::Contains("off_grid_320") && Catch::Contains("portable") &&
                           Catch::Contains("model_dim 320") && Catch::Contains("multiples of 128"));
    REQUIRE(said.size() == 1);  // two runtimes, one warning
    CHECK(said[0] == c.note);
    CHECK(second->path_choice().note == c.note);
  } else {
    CHECK(c.note.empty());
    CHECK(said.empty());
  }

  RuntimeOptions asked = o;
  asked.path = KernelPath::tensor_core;
  CHECK_THROWS_WITH(Runtime::create(off_grid, asked), Catch::Contains("tensor_core") && Catch::Contains("320"));

  // The model on the grid: the fastest path runs and nothing is said.
  auto on_grid = Runtime::create(load_config("generic_a8w4"), o);
  CHECK(on_grid->path_choice().note.empty());
  if (arch == "sm_90a") CHECK(on_grid->path() == KernelPath::hopper);
}
