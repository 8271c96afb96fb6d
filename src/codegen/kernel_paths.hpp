// Which kernel path runs where, and how each path rounds and sums.
#pragma once
#include <string>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

// Whether a (resolved) path's kernels can run for a backend and arch.
bool path_runs(KernelPath path, const ModelShape& shape, BackendKind backend, const std::string& arch);
// automatic resolved for a backend and arch; a path that cannot run there is an Error.
KernelPath resolve_path(KernelPath requested, const ModelShape& shape, BackendKind backend, const std::string& arch);

// How a (resolved) path rounds and sums: its x and h scale blocks and its matrix instructions'
// accumulation (Runtime::arithmetic(); the emulating reference repeats it).
PathArithmetic path_arithmetic(KernelPath path, const ModelShape& shape);

}  // namespace megamoe
