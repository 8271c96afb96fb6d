// Helpers shared by the test suites: temp folders, environment overrides, captured warnings.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/diagnostics.hpp"

namespace megamoe::test {

// A fresh folder under the system temp folder, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("megamoe-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" +
             std::to_string(std::rand()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The kernel cache the compile checks share in one run of the suites: MEGAMOE_TEST_COMPILE_CACHE,
// which tools/test.sh sets to a folder it empties first, so each distinct kernel is compiled once
// a run and a test that finds it there has it from this run's compile of the same source.
// Without the variable none: every kernel compiles in memory (a cache kept between runs would let
// a check pass on an old entry).
inline std::filesystem::path compile_check_cache() {
  const char* dir = std::getenv("MEGAMOE_TEST_COMPILE_CACHE");
  return dir && *dir ? std::filesystem::path(dir) : std::filesystem::path();
}

// Sets (or unsets, with nullopt) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Collects megamoe's warnings for a scope instead of printing them.
class CapturedWarnings {
 public:
  CapturedWarnings() {
    previous_ = set_warning_handler([this](const std::string& m) { messages.push_back(m); });
  }
  ~CapturedWarnings() { set_warning_handler(previous_); }
  std::vector<std::string> messages;

 private:
  WarningHandler previous_;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

// Runs a shell command; returns its exit status and fills `output` with stdout and stderr.
int run_command(const std::string& command, std::string& output);

// How each child of run_children ended: exited with `code`, killed by `signal`, or still running at
// the bound (then killed; `hung`).
struct ChildEnd {
  bool hung = false;
  int code = -1;    // the exit status where it exited
  int signal = 0;   // the signal where one ended it
};

// Runs this test binary once per entry of `args` (each its argv after the program name) as child
// processes, and waits for all of them for at most `seconds`.
std::vector<ChildEnd> run_children(const std::vector<std::vector<std::string>>& args, int seconds);

}  // namespace megamoe::test
