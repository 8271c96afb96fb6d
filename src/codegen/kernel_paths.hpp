// Which kernel path runs where (by the shape contract, config/path_requirements.hpp), and how
// each path rounds and sums.
#pragma once
#include <string>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

// Whether a (resolved) path's kernels can run the config on a backend and arch.
bool path_runs(KernelPath path, const Config& config, BackendKind backend, const std::string& arch);
// The path that runs for `requested` (automatic: the fastest that can run), and where it is not
// the fastest the backend and arch have, why. A requested path that cannot run is an Error.
PathChoice choose_path(KernelPath requested, const Config& config, BackendKind backend, const std::string& arch);
inline KernelPath resolve_path(KernelPath requested, const Config& config, BackendKind backend, const std::string& arch) {
  return choose_path(requested, config, backend, arch).path;
}
// A choice's note as a warning (common/diagnostics.hpp: stderr), once per process for each distinct note.
void announce_path_choice(const PathChoice& choice);

// How a (resolved) path rounds and sums in a bucket: its x and h scales (on the Hopper path the
// bucket's scale modes) and its matrix instructions' accumulation (Runtime::arithmetic(tokens);
// the emulating reference repeats it).
PathArithmetic path_arithmetic(KernelPath path, const Config& config, const BucketConfig& bucket);

}  // namespace megamoe
