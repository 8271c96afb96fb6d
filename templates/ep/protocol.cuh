// The pieces of the cross-rank protocol every EP kernel uses (docs/ep.md): the call sequence,
// addresses in a rank's symmetric region, bounded waits that record a timeout and raise the
// rank's abort flag, the route kernel's grid barrier, and the last block of a kernel (which
// signals the peers for all of them).
#pragma once
#include "ep/shmem.cuh"
#include "interface/kernel_args.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// The sequence number of the call a kernel belongs to: one more than the calls this rank has
// completed (the last kernel of a call counts it). Read after mm_wait_prior_grid().
MM_DEVICE u32 ep_call_seq(const EpArgs& ep) { return mm_load_volatile(ep.state + kStateCallSeq) + 1; }

MM_DEVICE bool ep_aborted(const EpArgs& ep) { return mm_load_volatile(ep.state + kStateAbort) != 0; }

// An address in rank r's symmetric region.
template <class T>
MM_DEVICE T* ep_at(const EpArgs& ep, int r, u64 offset) {
  return reinterpret_cast<T*>(ep.peers[r] + offset);
}

// The counts words of source s as this rank receives them in the call of sequence `seq`.
MM_DEVICE const int* ep_counts_from(const EpArgs& ep, int s, u32 seq) {
  return ep_at<const int>(ep, ep.rank, ep.counts_at) + ((seq & 1) * ep.world + s) * (ep.experts + 1);
}

// Records the first timeout of this rank (the phase and the rank waited for) and raises abort:
// every later wait of the rank gives up at once, and the rank's later kernels do nothing.
MM_DEVICE void ep_timeout(const EpArgs& ep, int phase, int peer) {
  if (atomicCAS(&ep.errors.words[kErrTimeoutPhase], 0, phase) == 0)
    atomicExch(&ep.errors.words[kErrTimeoutPeer], peer);
  atomicExch(ep.state + kStateAbort, 1u);
}

// Waits until `flag` (written by rank `peer`) holds call `seq` or a later one. False when the
// wait timed out or the rank aborted. One thread waits; it acquires what the writer released.
MM_DEVICE bool ep_wait_flag(const EpArgs& ep, const u32* flag, u32 seq, int phase, int peer) {
  u64 deadline = 0;
  for (u32 n = 0;; ++n) {
    if (int(mm_load_acquire_system(flag) - seq) >= 0) return true;
    if ((n & 31) == 0) {
      if (ep_aborted(ep)) return false;
      const u64 now = mm_clock_ns();
      if (deadline == 0) deadline = now + ep.timeout_ns;
      if (now > deadline) {
        ep_timeout(ep, phase, peer);
        return false;
      }
    }
    mm_pause();
  }
}

// Waits until a counter that this rank's own blocks raise reaches `need`; bounded as above
// (those blocks may themselves be waiting for a peer, which has its own bound).
MM_DEVICE bool ep_wait_count(const EpArgs& ep, const int* count, int need, int phase, int peer) {
  u64 deadline = 0;
  for (u32 n = 0;; ++n) {
    if (mm_load_acquire_device(count) >= need) return true;
    if ((n & 31) == 0) {
      if (ep_aborted(ep)) return false;
      const u64 now = mm_clock_ns();
      if (deadline == 0) deadline = now + 2 * ep.timeout_ns;
      if (now > deadline) {
        ep_timeout(ep, phase, peer);
        return false;
      }
    }
    mm_pause();
  }
}

// A barrier of every block of the grid (all resident: the runtime sizes the grid so). The last
// to arrive resets the count and opens the next generation. No thread may return before it.
MM_DEVICE void ep_grid_barrier(u32* count, u32* generation) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const u32 g = mm_load_volatile(generation);
    mm_fence_device();
    if (atomicAdd(count, 1u) == gridDim.x - 1) {
      atomicExch(count, 0u);
      mm_fence_device();
      atomicExch(generation, g + 1);
    } else {
      while (mm_load_volatile(generation) == g) mm_pause();
    }
    mm_fence_device();
  }
  __syncthreads();
}

// Whether this block is the last of `blocks` to get here (each block once per call); `counter`
// is reset for the next call. What every thread of every block wrote before, to any rank, is
// visible before what the last block writes after. Every thread of the block calls it.
MM_DEVICE bool ep_last_block(u32* counter, u32 blocks) {
  __shared__ int last;
  mm_fence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == blocks - 1;
    if (last) {
      atomicExch(counter, 0u);
      mm_fence_system();
    }
  }
  __syncthreads();
  return last != 0;
}

// The last block's signal to every rank: `flag_at` in each rank's region, at this rank's index,
// set to seq (a release: what was visible to it before is visible to whoever acquires it).
MM_DEVICE void ep_signal_all(const EpArgs& ep, u64 flag_at, u32 seq) {
  for (int r = threadIdx.x; r < ep.world; r += blockDim.x) ep_set_flag(ep, r, flag_at, ep.rank, seq);
}

}  // namespace megamoe
