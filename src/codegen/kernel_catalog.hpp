// Which kernels a config's bucket needs, as KernelSpecs.
#pragma once
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "megamoe/config.hpp"

namespace megamoe {

// The activation as rendered C++: a Params struct (in the preamble) and the type to use.
struct ActivationCode {
  std::string tag;       // "silu", "situv2", "swiglu": part of kernel names
  std::string preamble;  // struct ActivationParams {...}; (empty for silu)
  std::string type;      // e.g. "megamoe::SiTUv2<ActivationParams>"
};
ActivationCode activation_code(const Activation& act);

// The tile-wise activation kernel (templates/smoke/act_tile.cuh). Entry point:
//   (const float* in, float* out, int rows, int cols, int row_capacity, int* error)
KernelSpec act_tile_spec(const Activation& act, TileShape tile, bool bounds_check);

// Every kernel a bucket of the config launches, in launch order.
std::vector<KernelSpec> kernels_for_bucket(const Config& config, const BucketConfig& bucket);

}  // namespace megamoe
