// Bucket selection: a call's token count rounded up to a power of two, 1..32768.
#include <catch2/catch.hpp>

#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

TEST_CASE("token counts round up to their bucket", "[config][buckets]") {
  CHECK(bucket_for_tokens(0) == 1);
  CHECK(bucket_for_tokens(1) == 1);
  CHECK(bucket_for_tokens(2) == 2);
  CHECK(bucket_for_tokens(3) == 4);
  CHECK(bucket_for_tokens(129) == 256);
  CHECK(bucket_for_tokens(1000) == 1024);
  CHECK(bucket_for_tokens(1024) == 1024);
  CHECK(bucket_for_tokens(32767) == 32768);
  CHECK(bucket_for_tokens(32768) == 32768);
  CHECK_THROWS_WITH(bucket_for_tokens(32769), Catch::Contains("32769") && Catch::Contains("32768"));
  CHECK_THROWS_AS(bucket_for_tokens(-1), Error);
}

TEST_CASE("a config hands out its bucket's values", "[config][buckets]") {
  test::ScopedEnv no_dir("MEGAMOE_CONFIG_DIR", std::nullopt);
  Config k = config_for_world(load_config("kimi_k3_a8w4"), 8);  // where its keys count tokens
  for (int i = 0; i < kBucketCount; ++i) CHECK(k.buckets[i].bucket == 1 << i);
  CHECK(k.bucket_for_tokens(5).bucket == 8);
  CHECK(k.bucket_for_tokens(5).stage1.token_tile == 16);
  CHECK(k.bucket_for_tokens(5).dispatch.cus == 32);
  CHECK(k.bucket_for_tokens(3000).stage1.token_tile == 208);  // bucket 4096's
  CHECK(k.bucket_for_tokens(3000).dispatch.cus == 96);
  CHECK_THROWS_WITH(k.bucket(3), Catch::Contains("no bucket 3"));
}
