// What every launch of a call needs, on one rank or several: the device, the stream, and the
// stage events (recorded only with RuntimeOptions.profile). LayerCall and EpCall build on it.
#pragma once
#include "megamoe/device.hpp"
#include "runtime/bucket_kernels.hpp"

namespace megamoe {

// The stage boundaries a call records its events at (StageTimes are the spans between them).
enum class StageMark : int { start, routed, quantized, stage1_done, stage2_done, combined };

struct StreamLaunch {
  Device& device;
  StreamHandle stream;
  EventHandle* marks;  // an event per StageMark, or null

  // A kernel with the struct it takes. early: may start while the stream's previous kernel
  // finishes (Device::launch's early_start); such a kernel waits for it in mm_wait_prior_grid()
  // before it touches memory.
  template <class Args>
  void launch(const Kernel<Args>& kernel, unsigned grid, const Args& args, bool early = false) const {
    void* params[] = {const_cast<Args*>(&args)};
    device.launch(kernel.function, {grid}, {unsigned(kernel.threads)}, std::size_t(kernel.shared_bytes), stream,
                  params, early);
  }
  void mark(StageMark at) const {
    if (marks) device.record(marks[int(at)], stream);
  }
};

}  // namespace megamoe
