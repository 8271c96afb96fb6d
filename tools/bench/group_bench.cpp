#include "bench/group_bench.hpp"

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/ceilings.hpp"
#include "codegen/kernel_specs.hpp"
#include "common/workload.hpp"
#include "jit/kernel_builder.hpp"
#include "megamoe/megamoe.hpp"

namespace megamoe::bench {

namespace {

struct RankInputs {
  DeviceBuffer x, ids, w, y;
};

// One call on every rank, each on its own stream, timed on each rank's stream; the slowest
// rank's ms.
float time_call(std::vector<std::unique_ptr<Runtime>>& ranks, std::vector<StreamHandle>& streams,
                std::vector<std::unique_ptr<PreparedWeights>>& weights, std::vector<RankInputs>& in, int tokens,
                std::vector<EventHandle>& start, std::vector<EventHandle>& stop) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    Device& d = ranks[r]->device();
    d.record(start[r], streams[r]);
    ranks[r]->forward(*weights[r], in[r].x.get(), static_cast<const int*>(in[r].ids.get()),
                      static_cast<const float*>(in[r].w.get()), in[r].y.get(), tokens, streams[r]);
    d.record(stop[r], streams[r]);
  }
  float worst = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    ranks[r]->device().synchronize(streams[r]);
    worst = std::max(worst, ranks[r]->device().elapsed_ms(start[r], stop[r]));
  }
  return worst;
}

// The one-way latency of a flag from rank 0's GPU to rank 1's, in us: the EP kernels' release
// store and acquire load passed back and forth `rounds` times by one thread a side (two blocks of
// one GPU on loopback), half a round trip, the median of 5 runs timed on rank 0's stream. Each
// wait is bounded; a run that timed out throws.
double flag_latency_us(Device& d0, Device& d1) {
  const TypedSpec<FlagPingPongArgs> spec = flag_pingpong_spec();
  const BuildReport built = shared_kernel_builder(d0.kind(), d0.arch()).build(spec);
  std::unique_ptr<Module> m0 = d0.load_module(built.kernel->binary), m1 = d1.load_module(built.kernel->binary);
  void* f0 = m0->function(built.kernel->symbol);
  void* f1 = m1->function(built.kernel->symbol);
  constexpr int kRounds = 10000;
  DeviceBuffer flag0(d0, 64), flag1(d1, 64), status(d0, 64);
  StreamHandle s0 = d0.create_stream(), s1 = d1.create_stream();
  EventHandle start = d0.create_event(), stop = d0.create_event();
  std::vector<float> us;
  for (int rep = 0; rep < 6; ++rep) {
    d0.fill_bytes(flag0.get(), 0, 64), d1.fill_bytes(flag1.get(), 0, 64), d0.fill_bytes(status.get(), 0, 64);
    FlagPingPongArgs lead{static_cast<u32*>(flag0.get()), static_cast<u32*>(flag1.get()), kRounds, 1, 2000000000ull,
                          static_cast<int*>(status.get())};
    FlagPingPongArgs answer{static_cast<u32*>(flag1.get()), static_cast<u32*>(flag0.get()), kRounds, 0, 2000000000ull,
                            static_cast<int*>(status.get())};
    void* a1[] = {&answer};
    void* a0[] = {&lead};
    d1.launch(f1, Dim3{1}, Dim3{32}, 0, s1, a1);  // the answering side waits first
    d0.record(start, s0);
    d0.launch(f0, Dim3{1}, Dim3{32}, 0, s0, a0);
    d0.record(stop, s0);
    d0.synchronize(s0), d1.synchronize(s1);
    int failed = 0;
    d0.copy_to_host(&failed, status.get(), 4);
    if (failed) throw Error("megamoe-bench: the flag ping-pong between rank 0 and rank 1 timed out (2 s a wait)");
    if (rep > 0) us.push_back(d0.elapsed_ms(start, stop) * 1000.f / (2.f * kRounds));
  }
  d0.destroy_event(start), d0.destroy_event(stop);
  d0.destroy_stream(s0), d1.destroy_stream(s1);
  return bench::median(us);
}

// What the driver's copy from one GPU to another reaches (peer access on), printed.
double peer_copy_gb_per_s(Device& dev0, Device& dev1) {
  const std::size_t bytes = std::size_t(256) << 20;
  DeviceBuffer src(dev0, bytes), dst(dev1, bytes);
  StreamHandle s = dev0.create_stream();
  const float ms = bench::median_ms(dev0, s, 2, 10, [&] { dev0.copy_device_async(dst.get(), src.get(), bytes, s); });
  dev0.destroy_stream(s);
  const double gb_per_s = double(bytes) / (ms * 1e-3) / 1e9;
  fmt::print("peer copy GPU {} -> GPU {}: {:.0f} GB/s (256 MiB, median of 10)\n", dev0.ordinal(), dev1.ordinal(),
             gb_per_s);
  return gb_per_s;
}

}  // namespace

int run_group_bench(const GroupBenchOptions& o) {
  RuntimeOptions options;
  options.max_tokens = int(*std::max_element(o.sizes.begin(), o.sizes.end()));
  options.path = o.path;
  options.world = o.world;
  options.transport = o.transport;
  options.bucket_table = o.table;
  auto ranks = Runtime::create_ranks(o.config, options);
  const Config& cfg = ranks[0]->config();
  const ModelShape& m = cfg.model;
  Device& dev0 = ranks[0]->device();
  fmt::print("config {} on {} ({}), {} path, world {} ({})\n", cfg.name, dev0.name(), dev0.arch(),
             to_string(ranks[0]->path()), o.world, to_string(o.transport));
  fmt::print("{}\n", ranks[0]->table_choice().note);
  if (o.transport == Transport::loopback)
    fmt::print("loopback: the {} ranks share one GPU, each on its share of the SMs; these are not NVLink times, and a "
               "rank's time is not one GPU's\n",
               o.world);
  // The floor of the call: the slowest rank's, each rank's from the experts it serves and the rows
  // routed to it, at one GPU's ceilings (on loopback the ranks share one GPU: no floor of theirs).
  const bench::Ceilings ceilings = bench::measure_and_print_ceilings(dev0);
  // Over peer: what a copy from rank 0's GPU to rank 1's reaches (the driver's copy, peer access on).
  const double peer_gb_per_s = o.transport == Transport::peer ? peer_copy_gb_per_s(dev0, ranks[1]->device()) : 0;
  // The latency the protocol's signals pay between two ranks (on loopback: within one GPU).
  const double flag_us = flag_latency_us(dev0, ranks[1]->device());
  fmt::print("flag latency rank 0 -> rank 1 ({}): {:.2f} us one way (half a round trip of a release store and an "
             "acquire load, 10000 round trips, median of 5)\n",
             o.transport == Transport::loopback ? "two blocks of one GPU" : "GPU to GPU", flag_us);
  const Mxfp4ExpertWeights all = workload::random_group_weights(m, o.world, o.seed);
  std::vector<std::unique_ptr<PreparedWeights>> weights;
  std::vector<StreamHandle> streams;
  std::vector<EventHandle> start, stop;
  for (auto& rt : ranks) {
    weights.push_back(rt->prepare_weights(workload::with_shared_weights(
        workload::slice_experts(all, rt->rank() * m.experts_per_rank, m.experts_per_rank), m, o.seed)));
    streams.push_back(rt->device().create_stream());
    start.push_back(rt->device().create_event());
    stop.push_back(rt->device().create_event());
  }
  nlohmann::json rows = nlohmann::json::array();
  fmt::print("{:>6} {:>10} {:>10} {:>14} {:>10} {:>12}\n", "bs", "fused_ms", "serial_ms", "serial/fused", "floor_ms",
             "fused/floor");
  for (std::int64_t bs : o.sizes) {
    std::vector<RankInputs> in;
    std::vector<std::set<int>> touched(ranks.size());  // per destination rank: its experts that get rows
    std::vector<long long> pairs(ranks.size(), 0);
    for (auto& rt : ranks) {
      std::mt19937_64 rng = workload::inputs_rng(o.seed + 1000003ull * rt->rank(), bs);
      workload::Routing r = workload::make_routing("uniform", bs, m.topk, o.world * m.experts_per_rank, rng);
      for (int id : r.ids)
        if (id >= 0) touched[id / m.experts_per_rank].insert(id), ++pairs[id / m.experts_per_rank];
      std::vector<std::uint16_t> x = workload::random_bf16(bs, m.model_dim, rng);
      Device& d = rt->device();
      RankInputs ri{DeviceBuffer(d, x.size() * 2), DeviceBuffer(d, r.ids.size() * 4),
                    DeviceBuffer(d, r.weights.size() * 4), DeviceBuffer(d, x.size() * 2)};
      d.copy_to_device(ri.x.get(), x.data(), x.size() * 2);
      d.copy_to_device(ri.ids.get(), r.ids.data(), r.ids.size() * 4);
      d.copy_to_device(ri.w.get(), r.weights.data(), r.weights.size() * 4);
      d.fill_bytes(ri.y.get(), 0xFF, ri.y.bytes());
      in.push_back(std::move(ri));
    }
    // Side by side: fused and serial calls alternate, each after the same warm-up.
    std::vector<float> fused, serial;
    for (int i = 0; i < o.reps + 3; ++i)
      for (bool s : {false, true}) {
        for (auto& rt : ranks) rt->set_serial(s);
        const float ms = time_call(ranks, streams, weights, in, int(bs), start, stop);
        if (i >= 3) (s ? serial : fused).push_back(ms);
      }
    for (auto& rt : ranks) {
      CallErrors e = rt->take_errors();
      if (e.any())
        throw Error(fmt::format("megamoe-bench: rank {}: the kernels reported {} bad ids, {} bounds violations, {} "
                                "dropped rows",
                                rt->rank(), e.bad_ids, e.bounds_violations, e.dropped_rows));
    }
    const float f = bench::median(fused), s = bench::median(serial);
    double floor_ms = 0;
    for (std::size_t d = 0; d < ranks.size(); ++d)
      floor_ms = std::max(floor_ms,  // a rank's shared experts take its own tokens (bs each)
                          bench::layer_floor(m, (long long)touched[d].size() + m.shared_experts,
                                             pairs[d] + bs * m.shared_experts, ceilings.tbps, ceilings.tflops)
                              .ms);
    fmt::print("{:>6} {:>10.3f} {:>10.3f} {:>14.2f} {:>10.3f} {:>12.2f}\n", bs, f, s, s / f, floor_ms, f / floor_ms);
    std::fflush(stdout);
    rows.push_back({{"bs", bs}, {"fused_ms", f}, {"serial_ms", s}, {"serial_over_fused", s / f}, {"floor_ms", floor_ms},
                    {"fused_over_floor", f / floor_ms}});
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    ranks[r]->device().destroy_stream(streams[r]);
    ranks[r]->device().destroy_event(start[r]);
    ranks[r]->device().destroy_event(stop[r]);
  }
  fmt::print("per call: the slowest rank's time from its call's first launch to its last (events on each rank's "
             "stream), median of {} calls; fused and serial alternate on the same inputs; floor: the slowest rank's "
             "(docs/contract.md) at the ceilings above{}\n",
             o.reps, o.transport == Transport::loopback ? " (one GPU's: loopback ranks share it, so fused/floor is no "
                                                          "target there)" : "");
  if (!o.json.empty())
    std::ofstream(o.json) << nlohmann::json{{"config", cfg.name}, {"world", o.world},
                                            {"transport", std::string(to_string(o.transport))},
                                            {"path", std::string(to_string(ranks[0]->path()))},
                                            {"copy_tb_per_s", ceilings.tbps}, {"fp8_tflop_per_s", ceilings.tflops},
                                            {"peer_copy_gb_per_s", peer_gb_per_s},
                                            {"flag_latency_us", flag_us},
                                            {"buckets", rows}}
                                 .dump(2)
                          << "\n";
  return 0;
}

}  // namespace megamoe::bench
