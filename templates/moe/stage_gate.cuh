// What a stage kernel's tile waits for before it reads its rows. On one GPU nothing in the kernel
// (the rows were laid out by an earlier launch); over several ranks, the rows' arrival
// (ep/stage_gates.cuh: EpRowsGate, with the same members).
#pragma once
#include "moe/routed_tiles.cuh"

namespace megamoe {

struct NoRowsGate {
  static constexpr bool kWaits = false;
  MM_DEVICE bool early(bool first) const { return first; }
  MM_DEVICE void wait(const RoutedTile&, int, bool) const {}
};

}  // namespace megamoe
