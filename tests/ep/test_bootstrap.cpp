// The built-in all-gather (folder_all_gather) between forked processes: every round returns
// every rank's bytes in rank order; a rank that never comes is named in the error.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "megamoe/ep.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;

namespace {
std::vector<std::uint8_t> payload(int rank, int round, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t(rank * 31 + round * 7 + i);
  return v;
}
}  // namespace

TEST_CASE("forked processes all-gather through a folder, round after round", "[ep][bootstrap]") {
  test::TempDir dir;
  constexpr int kWorld = 4, kRounds = 6;
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // a rank: exit 0 when every round gave every rank's bytes in order
      int status = 0;
      try {
        AllGather gather = folder_all_gather(dir.path().string(), rank, kWorld, 20000);
        for (int round = 0; round < kRounds; ++round) {
          const std::size_t n = 1 + round * 100;
          const std::vector<std::uint8_t> all = gather(payload(rank, round, n));
          for (int r = 0; r < kWorld && status == 0; ++r) {
            const std::vector<std::uint8_t> want = payload(r, round, n);
            if (!std::equal(want.begin(), want.end(), all.begin() + r * n) || all.size() != kWorld * n) status = 10 + round;
          }
        }
      } catch (...) {
        status = 99;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

TEST_CASE("a rank that never comes is named when the all-gather times out", "[ep][bootstrap]") {
  test::TempDir dir;
  AllGather gather = folder_all_gather(dir.path().string(), 0, 3, 200);
  CHECK_THROWS_WITH(gather({1, 2, 3}), Catch::Contains("rank(s) 1, 2 did not arrive within 200 ms"));
  CHECK_THROWS_WITH(folder_all_gather(dir.path().string(), 3, 3), Catch::Contains("rank 3 of world 3"));
}
