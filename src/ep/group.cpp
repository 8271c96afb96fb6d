// A group's set-up: its options checked, the ipc group's all-gather, the records every rank hands
// round, NVSHMEM started (the Runtime's group creation, which calls these, is in
// runtime/group_ranks.cpp).
#include "ep/group.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "backend/cuda/nvshmem_library.hpp"
#include "interface/kernel_constants.cuh"
#include "megamoe/errors.hpp"

namespace megamoe {

int group_timeout_ms(const GroupOptions& o) {
  const char* env = std::getenv("MEGAMOE_TIMEOUT_MS");
  if (!env || !*env) return o.timeout_ms;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end || v < 1 || v > 3600000)
    throw Error(fmt::format("megamoe: MEGAMOE_TIMEOUT_MS = '{}', expected milliseconds from 1 to 3600000", env));
  return int(v);
}

void check_group_options(const Config& c, const GroupOptions& o) {
  if (o.world < 1 || o.world > kMaxWorld)
    throw Error(fmt::format("megamoe: RuntimeOptions.world = {}, expected 1..{}", o.world, int(kMaxWorld)));
  if (o.rank < 0 || o.rank >= o.world)
    throw Error(fmt::format("megamoe: RuntimeOptions.rank = {}, expected 0..{} (world {})", o.rank, o.world - 1, o.world));
  if (o.timeout_ms < 1)
    throw Error(fmt::format("megamoe: RuntimeOptions.timeout_ms = {}, expected at least 1", o.timeout_ms));
  if (o.routed_rows_capacity < 0)
    throw Error(fmt::format("megamoe: RuntimeOptions.routed_rows_capacity = {}, expected 0 (the worst case) or more",
                            o.routed_rows_capacity));
  const long long worst = (long long)o.world * o.max_tokens * c.model.topk;
  if (std::min(o.routed_rows_capacity > 0 ? o.routed_rows_capacity : worst, worst) > (1LL << 30))
    throw Error(fmt::format("megamoe: {} routed rows a rank (world {} x max_tokens {} x topk {}): set "
                            "RuntimeOptions.routed_rows_capacity to at most 2^30",
                            worst, o.world, o.max_tokens, c.model.topk));
  if (o.world > 1)
    for (const BucketConfig& b : c.buckets)
      if (b.combine_wire != c.buckets[0].combine_wire)
        throw Error(fmt::format("megamoe: config {}: buckets {} and {} have combine wires {} and {}; over several ranks a "
                                "rank's outputs go onto another rank's wire (whose bucket may differ), so every bucket "
                                "needs the same",
                                c.name, c.buckets[0].bucket, b.bucket, to_string(c.buckets[0].combine_wire),
                                to_string(b.combine_wire)));
  if (o.world > 1)
    for (const BucketConfig& b : c.buckets)
      if (b.x_scale != c.buckets[0].x_scale || b.h_scale != c.buckets[0].h_scale)
        throw Error(fmt::format("megamoe: config {}: buckets {} and {} have scale modes x {} h {} and x {} h {}; over "
                                "several ranks a rank's x goes onto another rank's dispatch wire and its rows are "
                                "computed in that rank's bucket, so every bucket needs the same",
                                c.name, c.buckets[0].bucket, b.bucket, to_string(c.buckets[0].x_scale),
                                to_string(c.buckets[0].h_scale), to_string(b.x_scale), to_string(b.h_scale)));
  if (o.max_tokens * (long long)c.model.topk >= (1 << 21))
    throw Error(fmt::format("megamoe: max_tokens {} x topk {}: the dispatch metadata holds fewer than 2^21 slots a rank",
                            o.max_tokens, c.model.topk));
}

std::shared_ptr<Group> make_ipc_group(const GroupOptions& options) {
  auto group = std::make_shared<Group>();
  group->transport = options.transport;
  group->world = options.world;
  group->all_gather = options.all_gather;
  if (!group->all_gather) {
    const char* dir = std::getenv("MEGAMOE_BOOTSTRAP_DIR");
    if (!dir || !*dir)
      throw Error(fmt::format("megamoe: the {} transport needs RuntimeOptions.all_gather, or MEGAMOE_BOOTSTRAP_DIR "
                              "naming a folder every rank can write",
                              to_string(options.transport)));
    group->all_gather = folder_all_gather(dir, options.rank, options.world, 10 * options.timeout_ms + 60000);
  }
  return group;
}

std::vector<std::string> exchange_records(const Group& group, int rank, int world, const std::string& fingerprint,
                                          const std::string& what, const std::string& payload) {
  constexpr std::size_t kFingerprintBytes = 384, kPayloadBytes = 256;  // a long config name and card name fit
  if (fingerprint.size() >= kFingerprintBytes || payload.size() > kPayloadBytes)
    throw Error(fmt::format("megamoe: the group's bootstrap record holds {} bytes of config and {} of payload, this "
                            "one needs {} and {}",
                            kFingerprintBytes - 1, kPayloadBytes, fingerprint.size(), payload.size()));
  const std::size_t record = 8 + kFingerprintBytes + kPayloadBytes;
  std::vector<std::uint8_t> mine(record, 0);
  const std::int32_t head[2] = {rank, std::int32_t(payload.size())};
  std::memcpy(mine.data(), head, 8);
  std::memcpy(mine.data() + 8, fingerprint.data(), fingerprint.size());
  std::memcpy(mine.data() + 8 + kFingerprintBytes, payload.data(), payload.size());
  const std::vector<std::uint8_t> all = group.all_gather(mine);
  if (all.size() != record * std::size_t(world))
    throw Error(fmt::format("megamoe: the group's all-gather returned {} bytes, expected {} ranks x {}", all.size(),
                            world, record));
  std::vector<std::string> payloads;
  for (int r = 0; r < world; ++r) {
    const std::uint8_t* rec = all.data() + std::size_t(r) * record;
    std::int32_t h[2];
    std::memcpy(h, rec, 8);
    const std::string theirs(reinterpret_cast<const char*>(rec + 8));
    if (h[0] != r)
      throw Error(fmt::format("megamoe: the all-gather's record {} comes from rank {}: every rank needs its own rank "
                              "(RuntimeOptions.rank) and the records in rank order",
                              r, h[0]));
    if (theirs != fingerprint)
      throw Error(fmt::format("megamoe: rank {} was created with '{}', rank {} with '{}' ({}): every rank needs the "
                              "same",
                              r, theirs, rank, fingerprint, what));
    if (h[1] < 0 || std::size_t(h[1]) > kPayloadBytes)
      throw Error(fmt::format("megamoe: rank {}'s bootstrap record says {} bytes of payload, at most {}", r, h[1],
                              kPayloadBytes));
    payloads.emplace_back(reinterpret_cast<const char*>(rec + 8 + kFingerprintBytes), std::size_t(h[1]));
  }
  return payloads;
}

void start_nvshmem(Device& device, const Group& group, const GroupOptions& o, const std::string& fingerprint,
                   std::size_t region_bytes) {
  Nvshmem& shmem = Nvshmem::get();  // before any rank waits on the others: a rank without NVSHMEM says so
  const std::vector<std::uint8_t> mine = o.rank == 0 ? shmem.unique_id() : std::vector<std::uint8_t>();
  const std::string id0 = exchange_records(
      group, o.rank, o.world, fingerprint, "config|experts x model_dim x inter_dim x topk|path|max_tokens|routed rows|"
      "region bytes|node size", std::string(mine.begin(), mine.end()))[0];
  device.make_current();
  // Room for the region and NVSHMEM's own (its signals, its barrier's work space).
  shmem.init(std::vector<std::uint8_t>(id0.begin(), id0.end()), o.rank, o.world, region_bytes + (256ull << 20));
}

unsigned loopback_share(const Device& d, int world) { return unsigned(std::max(2, (d.multiprocessors() - 16) / world / 2 * 2)); }

}  // namespace megamoe
