// A rank's buffers for expert parallelism: its symmetric region (what peers write: counts,
// flags, received rows, the combine wire), every rank's region as this rank's kernels address
// it, and this rank's own plan of a call (state words, token rows per destination, slot ranks,
// the segments of what it receives and their readiness).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ep/symmetric_layout.hpp"
#include "interface/kernel_args.cuh"
#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/runtime.hpp"

namespace megamoe {

// The bytes of a rank's own plan of a call (state words to block counts, below): what
// EpWorkspace::create allocates beside its symmetric region, and Runtime::workspace_bytes states.
struct EpPlanSizes {
  std::size_t state = 0, dest_row = 0, slot_rank = 0, segment = 0, segment_rows = 0, ready = 0, block_counts = 0;
  std::size_t total() const { return state + dest_row + slot_rank + segment + segment_rows + ready + block_counts; }
};
EpPlanSizes ep_plan_sizes(const Config& config, const RuntimeOptions& options);

struct EpWorkspace {
  static std::unique_ptr<EpWorkspace> create(Device& device, const Config& config, const RuntimeOptions& options,
                                             int x_block);
  ~EpWorkspace();

  Device* device = nullptr;
  SymmetricLayout layout;
  DeviceBuffer region;
  std::vector<void*> peers;   // every rank's region as this rank's kernels address it
  std::vector<void*> opened;  // ipc mappings of the peers' regions (closed on destruction)
  DeviceBuffer state, dest_row, slot_rank, segment, segment_rows, ready, block_counts;
  int world = 1, rank = 0, experts = 0, max_tokens = 0, topk = 0, model_dim = 0, x_block = 0;

  std::size_t plan_bytes() const;  // this rank's plan buffers (state .. block_counts), as allocated
  // The arguments every EP kernel shares. errors: the runtime's error words.
  EpArgs args(ErrorWords errors, int timeout_ms) const;
  // State words, counts and flags zeroed: at creation, and in recover() once no kernel runs.
  void clear();
};

}  // namespace megamoe
