// The built-in all-gather through a shared folder (folder_all_gather), and the names of the
// transports.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "megamoe/ep.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::loopback: return "loopback";
    case Transport::peer: return "peer";
    case Transport::ipc: return "ipc";
    case Transport::nvshmem: return "nvshmem";
  }
  return "?";
}

Transport transport_from_name(std::string_view name) {
  for (Transport t : {Transport::loopback, Transport::peer, Transport::ipc, Transport::nvshmem})
    if (name == to_string(t)) return t;
  throw Error(fmt::format("megamoe: transport '{}', expected loopback, peer, ipc or nvshmem", name));
}

AllGather folder_all_gather(std::string dir, int rank, int world, int timeout_ms) {
  namespace fs = std::filesystem;
  if (world < 1 || rank < 0 || rank >= world)
    throw Error(fmt::format("megamoe: folder_all_gather: rank {} of world {}, expected 0 <= rank < world", rank, world));
  fs::create_directories(dir);
  auto round = std::make_shared<int>(0);
  return [=](const std::vector<std::uint8_t>& mine) {
    const int r = (*round)++;
    auto file = [&](int round_, int rank_) { return fs::path(dir) / fmt::format("round{}-rank{}", round_, rank_); };
    {
      const fs::path tmp = file(r, rank).string() + ".tmp";
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(mine.data()), std::streamsize(mine.size()));
      if (!out) throw Error(fmt::format("megamoe: bootstrap: cannot write {}", tmp.string()));
      out.close();
      fs::rename(tmp, file(r, rank));
    }
    // Every rank has read round r - 2 once any rank is here: each wrote round r - 1 after it.
    std::error_code ignore;
    if (r >= 2) fs::remove(file(r - 2, rank), ignore);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<std::uint8_t> all;
    for (int other = 0; other < world; ++other) {
      while (!fs::exists(file(r, other))) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::string missing;
          for (int m = 0; m < world; ++m)
            if (!fs::exists(file(r, m))) missing += (missing.empty() ? "" : ", ") + std::to_string(m);
          throw Error(fmt::format("megamoe: bootstrap round {} in {}: rank(s) {} did not arrive within {} ms", r, dir,
                                  missing, timeout_ms));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::ifstream in(file(r, other), std::ios::binary);
      std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes.size() != mine.size())
        throw Error(fmt::format("megamoe: bootstrap round {}: rank {} sent {} bytes, rank {} {}", r, other, bytes.size(),
                                rank, mine.size()));
      all.insert(all.end(), bytes.begin(), bytes.end());
    }
    return all;
  };
}

}  // namespace megamoe
