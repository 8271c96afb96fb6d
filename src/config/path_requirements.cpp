#include "config/path_requirements.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "config/tile_sizes.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

namespace {

constexpr PathRequirements kTable[] = {
    {.path = KernelPath::hopper,
     .dim_multiple = 128,
     .dim_reason = "its weights come in 128-k chunks and 128-row blocks (layout v3)",
     .backend = BackendKind::cuda,
     .min_sm = 90,
     .needs_sm90a = true,
     .device_reason = "a cuda GPU of sm_90 (built as sm_90a)",
     .shared_grows_with_k = false},
    {.path = KernelPath::tensor_core,
     .dim_multiple = 128,
     .dim_reason = "its weights come in 128-k chunks and 128-row blocks (layout v3)",
     .backend = BackendKind::cuda,
     .min_sm = 89,
     .needs_sm90a = false,
     .device_reason = "a cuda GPU of sm_89 or later (fp8 mma.sync)",
     .shared_grows_with_k = true},
    {.path = KernelPath::portable,
     .dim_multiple = 64,
     .dim_reason = "each is split into 32-value MX blocks along K and 64-column tiles along N",
     .backend = std::nullopt,
     .min_sm = 0,
     .needs_sm90a = false,
     .device_reason = "any GPU",
     .shared_grows_with_k = false},
};

int sm_of(BackendKind backend, const std::string& arch) {
  if (backend != BackendKind::cuda || !arch.starts_with("sm_")) return 0;
  return std::atoi(arch.c_str() + 3);
}

bool device_fits(const PathRequirements& r, BackendKind backend, const std::string& arch) {
  if (!r.backend) return true;
  if (backend != *r.backend) return false;
  if (r.needs_sm90a) return arch == "sm_90a";
  return sm_of(backend, arch) >= r.min_sm;
}

}  // namespace

std::span<const PathRequirements> path_table() { return kTable; }

const PathRequirements& requirements(KernelPath path) {
  for (const PathRequirements& r : kTable)
    if (r.path == path) return r;
  throw Error(fmt::format("megamoe: no requirements for the {} path (resolve it first)", to_string(path)));
}

const PathRequirements& least_requirements() { return kTable[std::size(kTable) - 1]; }

int shared_memory_limit(BackendKind backend, const std::string& arch) {
  if (backend != BackendKind::cuda) return 65536;  // HIP: an AMD workgroup's LDS
  const int sm = sm_of(backend, arch);
  switch (sm) {
    case 80: case 87: return 166912;
    case 90: case 100: case 101: case 103: case 110: return kHopperSharedLimit;
    default: return 101376;  // sm_86, sm_89, sm_120 and any arch not listed
  }
}

std::string device_refusal(KernelPath path, BackendKind backend, const std::string& arch) {
  const PathRequirements& r = requirements(path);
  if (device_fits(r, backend, arch)) return {};
  return fmt::format("the {} path needs {}; this is {} {}", to_string(path), r.device_reason, to_string(backend), arch);
}

std::string path_refusal(KernelPath path, const Config& c, BackendKind backend, const std::string& arch) {
  if (std::string why = device_refusal(path, backend, arch); !why.empty()) return why;
  const PathRequirements& r = requirements(path);
  const ModelShape m = padded_model(path, c.model);
  if (r.shared_grows_with_k) {
    const int limit = shared_memory_limit(backend, arch);
    for (const BucketConfig& b : c.buckets) {
      const int bm1 = tensor_core_bm(b.stage1.token_tile), bm2 = tensor_core_bm(b.stage2.token_tile);
      const int need = std::max(tensor_core_smem(bm1, m.model_dim, 64), tensor_core_smem(bm2, m.inter_dim, 128));
      if (need > limit)
        return fmt::format("the {} path's stage kernels of bucket {} (token tiles {} and {}, K {} and {}) need {} bytes "
                           "of shared memory, and a block may have {} on {}",
                           to_string(path), b.bucket, bm1, bm2, m.model_dim, m.inter_dim, need, limit, arch);
    }
  }
  return {};
}

ModelShape padded_model(KernelPath path, const ModelShape& model) {
  const int multiple = requirements(path).dim_multiple;
  ModelShape m = model;
  m.model_dim = (model.model_dim + multiple - 1) / multiple * multiple;
  m.inter_dim = (model.inter_dim + multiple - 1) / multiple * multiple;
  return m;
}

Config padded_for_path(Config config, KernelPath path) {
  config.model = padded_model(path, config.model);
  return config;
}

std::string padding_note(KernelPath path, const Config& c) {
  const ModelShape p = padded_model(path, c.model);
  const ModelShape& m = c.model;
  if (p.model_dim == m.model_dim && p.inter_dim == m.inter_dim) return {};
  const double extra = double(p.model_dim) * p.inter_dim / (double(m.model_dim) * m.inter_dim) - 1;
  return fmt::format("config {} runs the {} path at model_dim {} and inter_dim {} padded with zeros to {} and {} (the "
                     "path needs multiples of {}: {}), {:.1f}% more GEMM work than the model's shape",
                     c.name, to_string(path), m.model_dim, m.inter_dim, p.model_dim, p.inter_dim,
                     requirements(path).dim_multiple, requirements(path).dim_reason, 100 * extra);
}

}  // namespace megamoe
