#include "tune/tune_journal.hpp"

#include <filesystem>
#include <iterator>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe::tune {

using json = nlohmann::json;

TuneJournal::TuneJournal(std::string path, const json& header) : path_(std::move(path)) {
  bool fresh = true;
  if (std::ifstream in(path_); in) {
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t at = 0, kept = 0;  // kept: the bytes up to the last whole line
    for (int number = 1; at < text.size(); ++number) {
      const std::size_t end = text.find('\n', at);
      const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
      json j;
      try {
        j = json::parse(line);
      } catch (const json::parse_error&) {
        // Only the last line can have been cut short by a run's end: it is dropped.
        if (end == std::string::npos) break;
        throw Error(fmt::format("megamoe-tune: journal {} line {} is not JSON: remove the file to start afresh", path_,
                                number));
      }
      at = kept = end == std::string::npos ? text.size() : end + 1;
      if (number == 1) {
        fresh = false;
        for (auto& [field, value] : header.items())
          if (j.value(field, json()) != value)
            throw Error(fmt::format("megamoe-tune: journal {} was written by another run: its {} is {}, this run's {} "
                                    "(remove it, or pass another --journal)",
                                    path_, field, j.value(field, json()).dump(), value.dump()));
        continue;
      }
      const std::string kind = j.value("kind", "");
      if (kind == "pair")
        pairs_[{j.at("bucket").get<int>(), j.at("incumbent").get<std::string>(), j.at("candidate").get<std::string>()}] =
            PairTimes{j.at("incumbent_ms").get<double>(), j.at("candidate_ms").get<double>(), j.at("ratio").get<double>()};
      else if (kind == "modes")
        modes_ = j.at("modes").get<std::string>();
      else if (kind == "bucket" || kind == "dispatch")
        (kind == "bucket" ? done_ : dispatch_done_)[j.at("bucket").get<int>()] =
            BucketRecord{j.at("entry").get<std::string>(), j.at("report")};
    }
    if (kept < text.size()) std::filesystem::resize_file(path_, kept);
    if (kept && text[kept - 1] != '\n') std::ofstream(path_, std::ios::app) << "\n";
  }
  if (const auto dir = std::filesystem::path(path_).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
  out_.open(path_, std::ios::app);
  if (!out_) throw Error(fmt::format("megamoe-tune: cannot write the journal {}", path_));
  if (fresh) append(header);
}

std::optional<PairTimes> TuneJournal::pair(int bucket, const std::string& incumbent, const std::string& candidate) const {
  auto it = pairs_.find({bucket, incumbent, candidate});
  if (it == pairs_.end()) return std::nullopt;
  return it->second;
}

void TuneJournal::add_pair(int bucket, const std::string& incumbent, const std::string& candidate, const PairTimes& t) {
  pairs_[{bucket, incumbent, candidate}] = t;
  append({{"kind", "pair"}, {"bucket", bucket}, {"incumbent", incumbent}, {"candidate", candidate},
          {"incumbent_ms", t.incumbent_ms}, {"candidate_ms", t.candidate_ms}, {"ratio", t.ratio}});
}

void TuneJournal::set_modes(const std::string& modes) {
  modes_ = modes;
  append({{"kind", "modes"}, {"modes", modes}});
}

namespace {
std::optional<BucketRecord> record_of(const std::map<int, BucketRecord>& done, int bucket) {
  auto it = done.find(bucket);
  if (it == done.end()) return std::nullopt;
  return it->second;
}
}  // namespace

std::optional<BucketRecord> TuneJournal::bucket(int bucket) const { return record_of(done_, bucket); }

std::optional<BucketRecord> TuneJournal::dispatch_bucket(int bucket) const { return record_of(dispatch_done_, bucket); }

void TuneJournal::add_bucket(int bucket, const BucketRecord& r) { add_record("bucket", done_, bucket, r); }

void TuneJournal::add_dispatch_bucket(int bucket, const BucketRecord& r) {
  add_record("dispatch", dispatch_done_, bucket, r);
}

void TuneJournal::add_record(const char* kind, std::map<int, BucketRecord>& done, int bucket, const BucketRecord& r) {
  done[bucket] = r;
  append({{"kind", kind}, {"bucket", bucket}, {"entry", r.entry}, {"report", r.report}});
}

void TuneJournal::append(const json& line) {
  out_ << line.dump() << "\n";
  out_.flush();
}

}  // namespace megamoe::tune
