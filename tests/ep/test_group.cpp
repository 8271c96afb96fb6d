// What a group of several ranks needs of a config's buckets: one combine wire and one set of
// scale modes (a rank's x goes onto another rank's wire, and its rows are computed there).
#include <catch2/catch.hpp>

#include <thread>

#include "ep/group.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("over several ranks every bucket needs the same combine wire and scale modes", "[ep]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config c = load_config("generic_a8w4");
  GroupOptions o;
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

// The records every rank of a process group exchanges at start (its IPC handle, or NVSHMEM's
// unique id), through the folder all-gather, two ranks on two threads.
TEST_CASE("exchange_records hands every rank's payload round and refuses ranks created otherwise", "[ep]") {
  auto exchange = [](const std::string& dir, const std::string& second_fingerprint) {
    std::string error;
    std::vector<std::string> got[2];
    std::thread other([&] {
      Group g;
      g.world = 2, g.all_gather = folder_all_gather(dir, 1, 2, 20000);
      try {
        got[1] = exchange_records(g, 1, 2, second_fingerprint, "what", std::string("rank one's id\0x", 15));
      } catch (const Error&) {
      }
    });
    Group g;
    g.world = 2, g.all_gather = folder_all_gather(dir, 0, 2, 20000);
    try {
      got[0] = exchange_records(g, 0, 2, "cfg|64", "config|max_tokens", "zero");
    } catch (const Error& e) {
      error = e.what();
    }
    other.join();
    return std::make_pair(error, std::vector<std::vector<std::string>>{got[0], got[1]});
  };
  test::TempDir dir;
  const auto [ok_error, ok] = exchange((dir.path() / "a").string(), "cfg|64");
  CHECK(ok_error.empty());
  for (const auto& payloads : ok) {
    REQUIRE(payloads.size() == 2);
    CHECK(payloads[0] == "zero");
    CHECK(payloads[1] == std::string("rank one's id\0x", 15));  // bytes, zeros included
  }
  const auto [error, _] = exchange((dir.path() / "b").string(), "cfg|128");
  CHECK_THAT(error, Catch::Contains("rank 1 was created with 'cfg|128', rank 0 with 'cfg|64' (config|max_tokens)"));
}
