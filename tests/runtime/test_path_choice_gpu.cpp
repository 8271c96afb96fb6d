// On the GPU: a model off the fast paths' 128 grid runs them padded, and the runtime says so once
// (a warning and Runtime::path_choice()); the portable path takes it as it is.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/diagnostics.hpp"
#include "megamoe/megamoe.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("a model off the fast paths' 128 grid runs them padded, and the runtime says so once", "[gpu][runtime]") {
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
  const bool hopper = arch == "sm_90a";
  const bool fast = hopper || arch.starts_with("sm_89") || arch.starts_with("sm_1");
  const PathChoice& c = first->path_choice();
  RuntimeOptions asked = o;
  if (fast) {
    // The GPU's fastest path, at 384 and 256: the note names the config, the path and the padding.
    CHECK(c.path == (hopper ? KernelPath::hopper : KernelPath::tensor_core));
    CHECK_THAT(c.note, Catch::Contains("off_grid_320") && Catch::Contains(std::string(to_string(c.path))) &&
                           Catch::Contains("model_dim 320 and inter_dim 192 padded with zeros to 384 and 256"));
    REQUIRE(said.size() == 1);  // two runtimes, one warning
    CHECK(said[0] == c.note);
    CHECK(second->path_choice().note == c.note);
    asked.path = KernelPath::tensor_core;  // asked for by name: padded too, and said
    auto tc = Runtime::create(off_grid, asked);
    CHECK(tc->path() == KernelPath::tensor_core);
    CHECK_THAT(tc->path_choice().note, Catch::Contains("tensor_core") && Catch::Contains("384"));
  } else {
    CHECK(c.path == KernelPath::portable);
    CHECK(c.note.empty());
    CHECK(said.empty());
  }
  asked.path = KernelPath::portable;  // 320 and 192 are multiples of its 64: nothing to pad
  CHECK(Runtime::create(off_grid, asked)->path_choice().note.empty());

  // The model on the grid: the fastest path runs and nothing is said.
  auto on_grid = Runtime::create(load_config("generic_a8w4"), o);
  CHECK(on_grid->path_choice().note.empty());
  if (hopper) CHECK(on_grid->path() == KernelPath::hopper);
}
