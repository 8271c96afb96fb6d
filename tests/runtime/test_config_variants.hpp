// The configs the GPU suite runs besides the built-in ones: Kimi-K3 with another activation, the
// fp8 combine wire, the checked build, and a small shape with odd chunk counts. One list, so that their kernels can be precompiled on a
// machine without a GPU (`megamoe_gpu_tests --write-configs DIR`, then megamoe-precompile on each
// file: tools/precompile/gpu_session_cache.sh).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace megamoe::test {

struct ConfigVariant {
  std::string name;        // also the file's stem
  std::string base;        // a built-in config
  std::string json_patch;  // merged over the base (RFC 7386)
};

const std::vector<ConfigVariant>& config_variants();

// Writes each variant as DIR/NAME.json; returns the path of `name`'s file.
std::string write_config_variant(const std::filesystem::path& dir, const std::string& name);
void write_config_variants(const std::filesystem::path& dir);

}  // namespace megamoe::test
