#include "codegen/kernel_paths.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "codegen/tile_sizes.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

bool path_runs(KernelPath path, const ModelShape& m, BackendKind backend, const std::string& arch) {
  int sm = 0;
  if (backend == BackendKind::cuda && arch.starts_with("sm_")) sm = std::atoi(arch.c_str() + 3);
  const bool fits = m.model_dim % 128 == 0 && m.inter_dim % 128 == 0;
  switch (path) {
    case KernelPath::portable: return true;
    case KernelPath::tensor_core: return sm >= 89 && fits;
    case KernelPath::hopper: return backend == BackendKind::cuda && arch == "sm_90a" && fits;
    case KernelPath::automatic: return true;
  }
  return false;
}

KernelPath resolve_path(KernelPath requested, const ModelShape& m, BackendKind backend, const std::string& arch) {
  if (requested == KernelPath::automatic) {
    for (KernelPath p : {KernelPath::hopper, KernelPath::tensor_core})
      if (path_runs(p, m, backend, arch)) return p;
    return KernelPath::portable;
  }
  if (!path_runs(requested, m, backend, arch))
    throw Error(fmt::format("megamoe: the {} path needs {} and model_dim and inter_dim multiples of 128; got {} {}, "
                            "model_dim {}, inter_dim {}",
                            to_string(requested),
                            requested == KernelPath::hopper ? "a cuda GPU of sm_90 (built as sm_90a)"
                                                            : "a cuda GPU of sm_89 or later",
                            to_string(backend), arch, m.model_dim, m.inter_dim));
  return requested;
}

PathArithmetic path_arithmetic(KernelPath path, const ModelShape& m) {
  switch (path) {
    case KernelPath::hopper: return {hopper_x_block(m.model_dim), kHopperHBlock, Accumulation::sm90_fp8_mma};
    case KernelPath::tensor_core: return {kTensorCoreScaleBlock, kTensorCoreScaleBlock, Accumulation::exact};
    default: return {32, 32, Accumulation::exact};
  }
}

}  // namespace megamoe
