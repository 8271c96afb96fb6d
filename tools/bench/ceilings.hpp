// The card's two ceilings, measured in the same run as the layer (docs/perf-notes.md): the
// device copy bandwidth (bytes read plus bytes written per second) and the dense fp8 matrix
// rate (cuBLASLt, e4m3 inputs, bf16 output, loaded at run time).
#pragma once
#include <string>

#include "megamoe/device.hpp"

namespace megamoe::bench {

struct Ceiling {
  double value = 0;   // TB/s for the copy, TFLOP/s for fp8
  bool measured = false;
  std::string how;    // what was run, or why nothing was
};

Ceiling measure_copy_bandwidth(Device& dev, std::size_t bytes);
Ceiling measure_fp8_rate(Device& dev, int n);

// Median of the elapsed times (ms) of `reps` runs of `work` on `stream`, after `warmup` runs.
template <class Work>
float median_ms(Device& dev, StreamHandle stream, int warmup, int reps, Work&& work);

}  // namespace megamoe::bench

#include "bench/median.ipp"
