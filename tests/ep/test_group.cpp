// What a group of several ranks needs of a config's buckets: one combine wire and one set of
// scale modes (a rank's x goes onto another rank's wire, and its rows are computed there).
#include <catch2/catch.hpp>

#include "ep/group.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("over several ranks every bucket needs the same combine wire and scale modes", "[ep]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config c = load_config("generic_a8w4");
  RuntimeOptions o;
  o.world = 2, o.max_tokens = 64;
  CHECK_NOTHROW(check_group_options(c, o));
  for (BucketConfig& b : c.buckets) b.x_scale = XScale::per_row;
  CHECK_NOTHROW(check_group_options(c, o));  // uniform: allowed
  c.buckets[12].x_scale = XScale::per_block;  // buckets ascend from 1: bucket 4096
  CHECK_THROWS_WITH(check_group_options(c, o), Catch::Contains("4096") && Catch::Contains("x row") &&
                                                   Catch::Contains("x block") && Catch::Contains("same"));
  o.world = 1;
  CHECK_NOTHROW(check_group_options(c, o));  // one GPU: per bucket
  o.world = 2;
  for (BucketConfig& b : c.buckets) b.x_scale = XScale::per_row;
  c.buckets[3].combine_wire = CombineWire::fp8_blockwise_1x32;  // bucket 8
  CHECK_THROWS_WITH(check_group_options(c, o), Catch::Contains("combine wires"));
}
