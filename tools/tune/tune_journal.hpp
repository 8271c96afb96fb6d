// megamoe-tune's journal: JSON lines, one a measurement, appended and flushed as it is made, so
// that a run cut short resumes where it stopped. The first line names what was tuned (config,
// starting table, device, search space); a journal of another run is refused, naming the field
// that differs. A pair of entries timed at a bucket is not timed again; a bucket whose search
// (of the tiles, or of the dispatch knobs over several ranks) ended is not searched again.
#pragma once
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "tune/pair_timer.hpp"

namespace megamoe::tune {

// A finished bucket as the journal keeps it.
struct BucketRecord {
  std::string entry;  // entry_text of the tuned entry
  nlohmann::json report;  // the bucket's report row (tuner.hpp)
};

class TuneJournal {
 public:
  // Opens `path` (created when absent). `header` says what this run tunes: an existing journal
  // whose header differs in a field is an Error naming the file, the field and both values.
  TuneJournal(std::string path, const nlohmann::json& header);

  const std::string& path() const { return path_; }
  int resumed_pairs() const { return int(pairs_.size()); }  // read back from an earlier run
  int resumed_buckets() const { return int(done_.size()); }

  std::optional<PairTimes> pair(int bucket, const std::string& incumbent, const std::string& candidate) const;
  void add_pair(int bucket, const std::string& incumbent, const std::string& candidate, const PairTimes& t);

  std::optional<std::string> modes() const { return modes_; }  // the table-wide modes, once chosen
  void set_modes(const std::string& modes);

  std::optional<BucketRecord> bucket(int bucket) const;
  void add_bucket(int bucket, const BucketRecord& r);

  // A bucket whose dispatch knobs were searched over several ranks (after its tiles).
  std::optional<BucketRecord> dispatch_bucket(int bucket) const;
  void add_dispatch_bucket(int bucket, const BucketRecord& r);

 private:
  void append(const nlohmann::json& line);
  void add_record(const char* kind, std::map<int, BucketRecord>& done, int bucket, const BucketRecord& r);

  std::string path_;
  std::ofstream out_;
  std::map<std::tuple<int, std::string, std::string>, PairTimes> pairs_;
  std::optional<std::string> modes_;
  std::map<int, BucketRecord> done_, dispatch_done_;
};

}  // namespace megamoe::tune
