// NVSHMEM for the nvshmem transport (docs/ep.md, "Over nodes: NVSHMEM"), optional twice over:
// built where its headers were found (cmake/FindNvshmem.cmake: MEGAMOE_HAVE_NVSHMEM), and its
// host library loaded at run time from the first of nvshmem_search_dirs() that has it. A
// build or a machine without it runs every other transport; asking for this one is an Error
// naming where it looked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace megamoe {

// Whether this build has the nvshmem transport (its device shim and host calls).
bool nvshmem_built();

// Where libnvshmem_host.so.3 and libnvshmem_device.a are looked for, in order:
// $MEGAMOE_NVSHMEM_DIR, the folder this build found NVSHMEM in, then the loader's own path
// (LD_LIBRARY_PATH; its device library then from $MEGAMOE_NVSHMEM_DIR only). Each a folder with lib/.
std::vector<std::string> nvshmem_search_dirs();

class Nvshmem {
 public:
  // The loaded library (loaded at the first call), or megamoe::Error naming where it looked.
  static Nvshmem& get();

  std::string version() const;          // the host library's name and version: "NVSHMEM v3.4.5"
  std::string device_library() const;   // the path of libnvshmem_device.a beside it
  std::string_view shim_object() const;  // the device shim (src/backend/cuda/nvshmem_shim.cu), LTO-IR

  // A unique id for a group to start from: one rank makes it, the group's all-gather hands it on.
  std::vector<std::uint8_t> unique_id();
  // Starts NVSHMEM as PE `rank` of `world` on the calling thread's current CUDA context, with
  // a symmetric heap of at least heap_bytes (NVSHMEM_SYMMETRIC_SIZE, unless the user set it).
  // Once a process: a second call must name the same rank and world.
  void init(const std::vector<std::uint8_t>& id, int rank, int world, std::size_t heap_bytes);
  bool initialized() const { return initialized_; }

  void* malloc(std::size_t bytes);  // collective: every PE, the same bytes, in the same order
  // `symmetric` of PE `pe` as this PE can load and store it, or null where it cannot (another node).
  void* ptr(void* symmetric, int pe) const;
  // A module whose kernels call NVSHMEM: its device state set (before any of them runs).
  void module_init(void* cumodule);

  struct Api;  // the library's entry points (nvshmem_library.cpp)

 private:
  Nvshmem() = default;
  const Api* api_ = nullptr;
  std::string dir_;
  bool initialized_ = false;
  int rank_ = -1, world_ = 0;
};

}  // namespace megamoe
