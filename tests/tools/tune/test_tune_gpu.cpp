// megamoe-tune end to end on the GPU: a small model's table tuned at three buckets, the config it
// writes loaded and checked against the CPU references by megamoe-run --check, and the run
// resumed from its journal without timing again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "megamoe/megamoe.hpp"
#include "runtime/test_config_variants.hpp"
#include "support/test_support.hpp"
#include "tune/tactic_space.hpp"
#include "config/config_json.hpp"
#include "tune/tactic_labels.hpp"
#include "tune/tuner.hpp"

using namespace megamoe;

namespace {

// o.print's lines into `lines`, and them as one text
void collect_lines(tune::TuneOptions& o, std::vector<std::string>& lines) {
  o.print = [&lines](const std::string& s) { lines.push_back(s); };
}
std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& s : lines) all += s + "\n";
  return all;
}

// megamoe-run (built beside the tests' folder) checks `config` against the references: it passes
// at every size in `args`.
void check_with_megamoe_run(const std::string& config, const std::string& args) {
  std::string out;
  const std::filesystem::path run =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "megamoe-run";
  const int rc = test::run_command("'" + run.string() + "' --config '" + config + "' --check " + args, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, Catch::Contains("PASS"));
  CHECK_THAT(out, !Catch::Contains("FAIL"));
}

}  // namespace

TEST_CASE("megamoe-tune: a small table tuned, written, checked by megamoe-run, resumed from its journal",
          "[tune][gpu_tune]") {
  test::TempDir dir;
  tune::TuneOptions o;
  // 8 experts, dims off the 128 grid (run padded), biases, gpt-oss's SwiGLU (both h modes allowed),
  // from generic_a8w4's one tile everywhere with h per 128: the modes and the tiles have room to move.
  o.config = test::write_config_variant(dir.path(), "small_padded_biases_x_row_h_static");
  o.start = "generic_a8w4";
  o.buckets = {1, 16, 128};
  o.out = (dir.path() / "small_tuned.json").string();
  o.pairs = 5;
  std::vector<std::string> lines;
  collect_lines(o, lines);
  const tune::TuneResult r = tune::run_tune(o);
  const std::string all = joined(lines);
  INFO(all);

  REQUIRE(r.rows.size() == 3);
  const Config start = with_buckets_of(load_config(o.config), load_config("generic_a8w4"));
  for (const tune::BucketReport& row : r.rows) {
    CHECK(row.tuned_ms > 0);
    CHECK(row.start_ms > 0);
    CHECK(row.timed > 0);
    CHECK(row.start_tactic == tune::tactic_label(start.bucket(row.bucket)));
    CHECK(row.tuned_tactic == tune::tactic_label(r.tuned.bucket(row.bucket)));
  }
  // The file loads as the result's config, with the model's shape and one set of modes: the tuned
  // table as this GPU's, the model's own kept as the default.
  const std::string card = open_device(BackendKind::cuda, 0)->name();
  const Config loaded = load_config(o.out);
  REQUIRE(loaded.tables.size() == 2);
  CHECK(loaded.tables[1].card == card);
  CHECK(loaded.tables[0].buckets == load_config(o.config).buckets);
  const Config written = with_table(loaded, card);
  CHECK(written.name == "small_tuned");
  CHECK(written.model.model_dim == 320);
  CHECK(written.model.expert_biases);
  for (const BucketConfig& b : written.buckets) {
    CHECK(tune::modes_of(b) == r.modes);
    CHECK(entry_text(b) == entry_text(r.tuned.bucket(b.bucket)));
  }
  CHECK(std::filesystem::exists(dir.path() / "small_tuned.report.txt"));
  CHECK_THAT(all, Catch::Contains("clock: "));
  CHECK_THAT(all, Catch::Contains("bucket   128: "));

  // megamoe-run checks the tuned config's layer against the references at each bucket.
  check_with_megamoe_run(o.out, "--bs 1,16,128");

  // Again with the same journal: every bucket read back, nothing timed (the journal gains no
  // line), the same table.
  auto journal_lines = [&] {
    std::ifstream in(dir.path() / "small_tuned.journal.jsonl");
    return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
  };
  const auto before = journal_lines();
  lines.clear();
  o.out = (dir.path() / "small_tuned_again.json").string();
  o.journal = (dir.path() / "small_tuned.journal.jsonl").string();
  const tune::TuneResult again = tune::run_tune(o);
  for (const tune::BucketReport& row : again.rows) CHECK(row.note == "resumed from the journal");
  for (const BucketConfig& b : again.tuned.buckets)
    CHECK(entry_text(b) == entry_text(r.tuned.bucket(b.bucket)));
  CHECK(journal_lines() == before);
}

TEST_CASE("megamoe-tune --world 2: the dispatch knobs searched on loopback ranks, the config checked over them",
          "[tune][gpu_tune]") {
  test::TempDir dir;
  tune::TuneOptions o;
  o.config = test::write_config_variant(dir.path(), "small_padded_biases_x_row_h_static");  // 8 experts, keys at 8
  o.buckets = {1, 64, 256};
  o.out = (dir.path() / "small_ep.json").string();
  o.pairs = 5;
  o.space.modes = o.space.fp8_wire = o.space.fp8_resident = false;
  o.world = 2;
  std::vector<std::string> lines;
  collect_lines(o, lines);
  const tune::TuneResult r = tune::run_tune(o);
  const std::string all = joined(lines);
  INFO(all);

  // At world 2 a rank holds 4 experts: key b is taken by b / 2 tokens a rank, and key 1 by none.
  REQUIRE(r.dispatch_rows.size() == 3);
  CHECK(r.dispatch_rows[0].bucket == 1);
  CHECK_THAT(r.dispatch_rows[0].note, Catch::Contains("not searched"));
  CHECK(r.dispatch_rows[0].timed == 0);
  for (int i : {1, 2}) {
    const tune::DispatchReport& row = r.dispatch_rows[i];
    CHECK(row.tokens == row.bucket / 2);
    CHECK(row.timed >= int(std::size(tune::kDispatchBlocks)));
    CHECK(row.tuned_ms > 0);
    CHECK(row.start_ms > 0);
    CHECK(row.start == tune::dispatch_label(load_config(o.config).bucket(row.bucket)));
    CHECK(row.tuned == tune::dispatch_label(r.tuned.bucket(row.bucket)));
  }
  CHECK_THAT(r.report, Catch::Contains("dispatch over 2 ranks (loopback)"));
  std::ifstream written(o.out);
  CHECK_THAT(std::string(std::istreambuf_iterator<char>(written), {}),
             Catch::Contains("dispatch knobs searched over 2 ranks (loopback)"));

  // The tuned config over two loopback ranks, checked against the references at those sizes.
  check_with_megamoe_run(o.out, "--world 2 --bs 1,32,128");

  // Resumed: every dispatch bucket read back from the journal, the same table.
  lines.clear();
  o.out = (dir.path() / "small_ep_again.json").string();
  o.journal = (dir.path() / "small_ep.journal.jsonl").string();
  const tune::TuneResult again = tune::run_tune(o);
  REQUIRE(again.dispatch_rows.size() == 3);
  for (int i : {1, 2}) CHECK(again.dispatch_rows[i].note == "resumed from the journal");
  for (const BucketConfig& b : again.tuned.buckets)
    CHECK(entry_text(b) == entry_text(r.tuned.bucket(b.bucket)));
}
