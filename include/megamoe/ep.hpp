// Expert parallelism: how the ranks of a group reach each other (docs/ep.md). A group of W ranks
// runs one Runtime per rank; rank r owns global experts [r * experts_per_rank, (r + 1) *
// experts_per_rank), and every rank's forward() dispatches its tokens to the ranks that own their
// experts and gets their outputs back.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace megamoe {

enum class Transport {
  loopback,  // one process, one GPU, every rank on it: the whole protocol where one GPU is at hand
  peer,      // one process driving one GPU per rank, with peer access between them
  ipc,       // one process per GPU, as inference engines run; memory handles exchanged by an all-gather
  // One process per GPU over nodes: the symmetric region on NVSHMEM's symmetric heap, a rank of
  // the same node (RuntimeOptions::node_size) written by load and store as ipc does, a rank of
  // another node by NVSHMEM's puts from inside the kernels; started from a unique id that the
  // all-gather hands round. NVSHMEM is found at run time (docs/ep.md, "Over nodes: NVSHMEM").
  nvshmem,
};
std::string_view to_string(Transport transport);
Transport transport_from_name(std::string_view name);  // "loopback", "peer", "ipc" or "nvshmem"

// An all-gather of bytes across the group's processes: every rank passes its own bytes (the same
// number on every rank) and gets every rank's, rank after rank. torch.distributed, MPI or an
// engine's own channel can serve; the ipc transport uses it to exchange memory handles and to
// meet at creation and in recover().
using AllGather = std::function<std::vector<std::uint8_t>(const std::vector<std::uint8_t>& mine)>;

// A built-in all-gather through a folder that every rank can read and write (the tools use it;
// MEGAMOE_BOOTSTRAP_DIR names one for RuntimeOptions without an all_gather). Each round writes a
// file per rank (written aside, then renamed) and waits for the others' for at most timeout_ms;
// throws megamoe::Error naming the ranks that did not come. Start every rank on an empty folder.
AllGather folder_all_gather(std::string dir, int rank, int world, int timeout_ms = 60000);

}  // namespace megamoe
