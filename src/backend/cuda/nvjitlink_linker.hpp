// nvJitLink, loaded at run time (libnvJitLink.so.13 from the CUDA toolkit the build used, or the
// loader's path): links a kernel compiled to LTO-IR with objects and static libraries into a
// cubin. The nvshmem transport's kernels need it (NVSHMEM's device library); nothing else does.
#pragma once
#include <string>
#include <string_view>

#include "backend/backend.hpp"

namespace megamoe {

// The cubin of `lto_ir` linked with `inputs` for `arch` ("sm_90a"). False with `log` set when the
// link failed; megamoe::Error where nvJitLink cannot be loaded.
bool link_lto(const std::string& arch, std::string_view lto_ir, const LinkInputs& inputs, std::string& cubin,
              std::string& log);

// "nvJitLink 13.0", or megamoe::Error where it cannot be loaded.
std::string nvjitlink_identity();

}  // namespace megamoe
