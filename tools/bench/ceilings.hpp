// The card's two ceilings, measured in the same run as the layer (docs/perf-notes.md): the
// device copy bandwidth (bytes read plus bytes written per second) and the dense fp8 matrix
// rate (cuBLASLt, e4m3 inputs, bf16 output, loaded at run time). Each is measured sustained,
// after a second of back-to-back runs, as the layer's bursts run (an H200 under load holds its
// power limit by lowering its clock), and in a short burst on a rested card.
#pragma once
#include <string>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe::bench {

struct Ceiling {
  double value = 0;   // TB/s for the copy, TFLOP/s for fp8: sustained
  double burst = 0;   // the same over a short burst (median of 10 single runs)
  bool measured = false;
  std::string how;    // what was run, or why nothing was
};

Ceiling measure_copy_bandwidth(Device& dev, std::size_t bytes);
Ceiling measure_fp8_rate(Device& dev, int n);

// Both ceilings measured on `dev`, each printed on a line of its own (what was run, or why not),
// and the values the floor takes: the sustained ones (the fp8 rate falls back to
// docs/contract.md's 1300 TFLOP/s where cuBLASLt could not be run).
struct Ceilings {
  Ceiling copy, fp8;
  double tbps = 0, tflops = 0;
};
Ceilings measure_and_print_ceilings(Device& dev);

// The floor of one rank's call (docs/contract.md): max(MXFP4 bytes of the experts it touches / copy
// bandwidth, the FLOPs of its routed rows / fp8 rate), in ms, with the ceilings in TB/s and
// TFLOP/s; bytes_ms and flops_ms are the two terms.
struct Floor {
  double ms = 0, bytes_ms = 0, flops_ms = 0;
};
Floor layer_floor(const ModelShape& m, long long experts_touched, long long routed_pairs, double tbps, double tflops);

// median(sample): the middle value (the upper middle one of an even count); in median.ipp.
// Median of the elapsed times (ms) of `reps` runs of `work` on `stream`, after `warmup` runs.
template <class Work>
float median_ms(Device& dev, StreamHandle stream, int warmup, int reps, Work&& work);

// The ms of one run of `work`: over a short burst (median of 10 single runs), and sustained
// (after `warm_s` seconds of back-to-back runs, the median of 10 batches of about 50 ms each).
struct RunTimes {
  float burst_ms = 0, sustained_ms = 0;
};
template <class Work>
RunTimes burst_and_sustained_ms(Device& dev, StreamHandle stream, double warm_s, Work&& work);

}  // namespace megamoe::bench

#include "bench/median.ipp"
