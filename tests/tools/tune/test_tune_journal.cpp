// megamoe-tune's journal: what a run records, a resumed run reads back; another run's is refused.
#include <catch2/catch.hpp>

#include <fstream>

#include "megamoe/errors.hpp"
#include "support/test_support.hpp"
#include "tune/tune_journal.hpp"

using namespace megamoe;
using namespace megamoe::tune;

TEST_CASE("the journal resumes: pairs, modes and finished buckets read back as written", "[tune]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "sub" / "t.journal.jsonl").string();
  const nlohmann::json header = {{"journal", "megamoe-tune/1"}, {"config", "kimi_k3_a8w4"}, {"pairs", 10}};
  {
    TuneJournal j(path, header);
    CHECK(j.resumed_pairs() == 0);
    CHECK(!j.pair(512, "a", "b"));
    j.add_pair(512, "a", "b", {1.25, 1.0, 0.8});
    j.add_pair(512, "a", "c", {1.25, 1.5, 1.2});
    j.add_pair(64, "a", "b", {0.5, 0.75, 1.5});
    j.set_modes("x row, h static, wire bf16");
    j.add_bucket(512, {"{\"entry\":1}", {{"bucket", 512}, {"tuned_ms", 1.0}}});
    j.add_dispatch_bucket(64, {"{\"entry\":2}", {{"bucket", 64}, {"tokens", 128}}});
  }
  TuneJournal j(path, header);
  CHECK(j.resumed_pairs() == 3);
  CHECK(j.resumed_buckets() == 1);
  REQUIRE(j.pair(512, "a", "b"));
  CHECK(j.pair(512, "a", "b")->incumbent_ms == 1.25);
  CHECK(j.pair(512, "a", "b")->candidate_ms == 1.0);
  CHECK(j.pair(512, "a", "b")->ratio == 0.8);
  CHECK(j.pair(512, "a", "c")->ratio == 1.2);
  CHECK(j.pair(64, "a", "b")->ratio == 1.5);
  CHECK(!j.pair(64, "a", "c"));
  CHECK(!j.pair(512, "b", "a"));  // the incumbent and the candidate are not interchangeable
  CHECK(j.modes() == std::optional<std::string>("x row, h static, wire bf16"));
  REQUIRE(j.bucket(512));
  CHECK(j.bucket(512)->entry == "{\"entry\":1}");
  CHECK(j.bucket(512)->report["tuned_ms"] == 1.0);
  CHECK(!j.bucket(64));  // its dispatch search is a record of its own
  REQUIRE(j.dispatch_bucket(64));
  CHECK(j.dispatch_bucket(64)->entry == "{\"entry\":2}");
  CHECK(j.dispatch_bucket(64)->report["tokens"] == 128);
  CHECK(!j.dispatch_bucket(512));
}

TEST_CASE("the journal refuses another run's, tolerates a last line cut short, and names a corrupt one", "[tune]") {
  test::TempDir dir;
  const std::string path = (dir.path() / "t.jsonl").string();
  const nlohmann::json header = {{"journal", "megamoe-tune/1"}, {"config", "kimi_k3_a8w4"}, {"pairs", 10}};
  { TuneJournal(path, header).add_pair(8, "a", "b", {1, 1, 1}); }
  nlohmann::json other = header;
  other["pairs"] = 20;
  CHECK_THROWS_WITH(TuneJournal(path, other), Catch::Contains("its pairs is 10, this run's 20"));
  // A run killed mid-line leaves its last line partial: what came before is kept, the rest dropped.
  { std::ofstream(path, std::ios::app) << "{\"kind\":\"pair\",\"buck"; }
  {
    TuneJournal j(path, header);
    CHECK(j.resumed_pairs() == 1);
    j.add_pair(16, "a", "b", {1, 2, 2});
  }
  CHECK(TuneJournal(path, header).resumed_pairs() == 2);
  // A line that is not JSON before the last cannot be read past.
  { std::ofstream(path, std::ios::app) << "not json\n{\"kind\":\"modes\",\"modes\":\"x\"}\n"; }
  CHECK_THROWS_WITH(TuneJournal(path, header), Catch::Contains("line 4 is not JSON"));
}
