// A rank's buffers for expert parallelism: its symmetric region (what peers write: counts,
// flags, received rows, the combine wire), every rank's region as this rank's kernels address
// it, and this rank's own plan of a call (state words, token rows per destination, slot ranks,
// the segments of what it receives and their readiness).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ep/group_options.hpp"
#include "ep/symmetric_layout.hpp"
#include "interface/kernel_args.cuh"
#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

// The bytes of a rank's own plan of a call (state words to block counts, below): what
// EpWorkspace::create allocates beside its symmetric region, and Runtime::workspace_bytes states.
struct EpPlanSizes {
  std::size_t state = 0, dest_row = 0, slot_rank = 0, segment = 0, segment_rows = 0, ready = 0, block_counts = 0;
  // The nvshmem transport over several nodes: the call's gateway rows and per source its rows scanned.
  std::size_t gateway_rows = 0, forwarded = 0;
  std::size_t total() const {
    return state + dest_row + slot_rank + segment + segment_rows + ready + block_counts + gateway_rows + forwarded;
  }
};
// The ranks of a node: GroupOptions::node_size, or the whole group where it is 0.
int ep_node_size(const GroupOptions& options);
// Whether the group spans several nodes (the nvshmem transport's puts, forwarding and node sums).
bool ep_over_nodes(const GroupOptions& options);
EpPlanSizes ep_plan_sizes(const Config& config, const GroupOptions& options);

// The symmetric region of a rank created with `options` (x_block: the dispatch wire's scale
// block); the nvshmem transport's has its staging areas too.
SymmetricLayout ep_symmetric_layout(const Config& config, const GroupOptions& options, int x_block,
                                    long long rows_capacity);

// A rank's symmetric region: device memory of its own (loopback, peer, ipc), or NVSHMEM's
// symmetric heap (nvshmem: collective, every rank the same bytes; kept until the process ends).
class SymmetricRegion {
 public:
  SymmetricRegion() = default;
  SymmetricRegion(Device& device, std::size_t bytes, bool nvshmem);
  SymmetricRegion(SymmetricRegion&&) = delete;
  ~SymmetricRegion();
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  DeviceBuffer owned_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct EpWorkspace {
  static std::unique_ptr<EpWorkspace> create(Device& device, const Config& config, const GroupOptions& options,
                                             int x_block, long long rows_capacity);
  ~EpWorkspace();

  Device* device = nullptr;
  SymmetricLayout layout;
  std::unique_ptr<SymmetricRegion> region;
  std::vector<void*> peers;   // every rank's region as this rank's kernels address it (null: reached by puts)
  std::vector<void*> opened;  // ipc mappings of the peers' regions (closed on destruction)
  DeviceBuffer state, dest_row, slot_rank, segment, segment_rows, ready, block_counts, gateway_rows, forwarded;
  int world = 1, rank = 0, experts = 0, max_tokens = 0, topk = 0, model_dim = 0, x_block = 0;
  int remote = 0;  // ranks reached by NVSHMEM's puts (the nvshmem transport's other nodes)
  int node_size = 1, node_first = 0;  // this rank's node: ranks [node_first, node_first + node_size)

  std::size_t plan_bytes() const;  // this rank's plan buffers (state .. block_counts), as allocated
  // The arguments every EP kernel shares. errors: the runtime's error words.
  EpArgs args(ErrorWords errors, int timeout_ms) const;
  // State words, counts and flags zeroed: at creation, and in recover() once no kernel runs.
  void clear();
};

}  // namespace megamoe
