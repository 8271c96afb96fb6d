#include "codegen/kernel_paths.hpp"
#include "codegen/path_kernels.hpp"

#include <fmt/format.h>

#include "config/path_requirements.hpp"
#include "config/tile_sizes.hpp"
#include "common/diagnostics.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

bool path_runs(KernelPath path, const Config& c, BackendKind backend, const std::string& arch) {
  return path == KernelPath::automatic || path_refusal(path, c, backend, arch).empty();
}

PathChoice choose_path(KernelPath requested, const Config& c, BackendKind backend, const std::string& arch) {
  PathChoice choice;
  choice.requested = requested;
  if (requested != KernelPath::automatic) {
    if (std::string why = path_refusal(requested, c, backend, arch); !why.empty())
      throw Error(fmt::format("megamoe: {}", why));
    choice.path = requested;
    choice.note = padding_note(choice.path, c);
    return choice;
  }
  // The fastest path that runs; each faster one the device has (refused for this config, not
  // for the device) goes into the note.
  std::string slower_because;
  for (const PathRequirements& r : path_table()) {
    const std::string why = path_refusal(r.path, c, backend, arch);
    if (why.empty()) {
      choice.path = r.path;
      break;
    }
    if (device_refusal(r.path, backend, arch).empty()) slower_because += (slower_because.empty() ? "" : "; ") + why;
  }
  if (!slower_because.empty())
    choice.note = fmt::format("config {} runs the {} path on {} {}, slower than the GPU's fastest: {}", c.name,
                              to_string(choice.path), to_string(backend), arch, slower_because);
  if (std::string padded = padding_note(choice.path, c); !padded.empty())
    choice.note += (choice.note.empty() ? "" : "; ") + padded;
  return choice;
}

void announce_path_choice(const PathChoice& choice) {
  if (!choice.note.empty()) warn_once(choice.note);
}

PathArithmetic path_arithmetic(KernelPath path, const Config& c, const BucketConfig& b) {
  PathArithmetic a;
  with_path(path, [&]<class P>(P) { a = P::arithmetic(c, b); });
  return a;
}

}  // namespace megamoe
