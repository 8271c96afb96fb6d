// Backend selection.
#include <fmt/format.h>

#include "backend/backend.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

std::string_view to_string(BackendKind kind) { return kind == BackendKind::cuda ? "cuda" : "hip"; }

BackendKind backend_from_name(std::string_view name) {
  if (name == "cuda") return BackendKind::cuda;
  if (name == "hip") return BackendKind::hip;
  throw Error(fmt::format("megamoe: unknown backend '{}' (expected cuda or hip)", name));
}

#if !MEGAMOE_HAVE_HIP
namespace {
[[noreturn]] void hip_not_built() {
  throw Error("megamoe: the hip backend was not built (HIP headers were not found at configure time)");
}
}  // namespace
#endif

std::unique_ptr<Compiler> make_compiler(BackendKind kind) {
  if (kind == BackendKind::cuda) return make_nvrtc_compiler();
#if MEGAMOE_HAVE_HIP
  return make_hiprtc_compiler();
#else
  hip_not_built();
#endif
}

std::unique_ptr<Device> open_device(BackendKind kind, int ordinal) {
  if (kind == BackendKind::cuda) return open_cuda_device(ordinal);
#if MEGAMOE_HAVE_HIP
  return open_hip_device(ordinal);
#else
  hip_not_built();
#endif
}

bool gpu_available(BackendKind kind, std::string* why) {
  try {
    open_device(kind, 0);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace megamoe
