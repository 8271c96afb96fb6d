// The latency of a flag between two ranks' GPUs (megamoe-bench --world W): the EP kernels' own
// release store and acquire load (prelude), one thread a side, a bounded wait per round.
#pragma once
#include "interface/kernel_args.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// Waits until *flag holds `round`; false once timeout_ns have passed since the wait began.
MM_DEVICE bool pingpong_wait(const u32* flag, u32 round, u64 timeout_ns) {
  u64 deadline = 0;
  for (u32 n = 0;; ++n) {
    if (mm_load_acquire_system(flag) >= round) return true;
    if ((n & 63) == 0) {
      const u64 now = mm_clock_ns();
      if (deadline == 0) deadline = now + timeout_ns;
      if (now > deadline) return false;
    }
  }
}

MM_DEVICE void flag_pingpong(const FlagPingPongArgs& a) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  for (u32 r = 1; r <= u32(a.rounds); ++r) {
    if (a.leads) mm_store_release_system(a.theirs, r);
    if (!pingpong_wait(a.mine, r, a.timeout_ns)) {
      *a.status = 1;
      return;
    }
    if (!a.leads) mm_store_release_system(a.theirs, r);
  }
}

}  // namespace megamoe
