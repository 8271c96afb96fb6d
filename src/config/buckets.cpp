// Batch-size buckets: a call's token count rounded up to a power of two.
#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

int bucket_for_tokens(std::int64_t tokens) {
  if (tokens < 0 || tokens > kMaxBucket)
    throw Error(fmt::format("megamoe: token count {} is outside [0, {}]", tokens, kMaxBucket));
  return tokens <= kMinBucket ? kMinBucket : int(std::bit_ceil(std::uint64_t(tokens)));
}

const BucketConfig& Config::bucket(int bucket_size) const {
  for (auto& b : buckets)
    if (b.bucket == bucket_size) return b;
  throw Error(fmt::format("megamoe: config {} has no bucket {} (buckets are powers of two from {} to {})",
                          name, bucket_size, kMinBucket, kMaxBucket));
}

int Config::table_key(std::int64_t tokens) const {
  const int own = megamoe::bucket_for_tokens(tokens);  // checks the count
  const std::int64_t keys = keys_experts_per_rank, held = model.experts_per_rank;
  if (keys == held || keys <= 0 || held <= 0) return own;
  const std::int64_t same_density = (tokens * keys + held - 1) / held;  // the same tokens x topk / experts per rank
  return megamoe::bucket_for_tokens(std::min<std::int64_t>(same_density, kMaxBucket));
}

const BucketConfig& Config::bucket_for_tokens(std::int64_t tokens) const { return bucket(table_key(tokens)); }

std::string_view to_string(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::silu: return "silu";
    case ActivationKind::situv2: return "situv2";
    case ActivationKind::swiglu: return "swiglu";
  }
  return "?";
}

std::string_view to_string(KernelPath path) {
  switch (path) {
    case KernelPath::automatic: return "automatic";
    case KernelPath::portable: return "portable";
    case KernelPath::tensor_core: return "tensor_core";
    case KernelPath::hopper: return "hopper";
  }
  return "?";
}

KernelPath path_from_name(std::string_view name) {
  if (name == "auto") return KernelPath::automatic;
  for (KernelPath p : {KernelPath::automatic, KernelPath::portable, KernelPath::tensor_core, KernelPath::hopper})
    if (name == to_string(p)) return p;
  throw Error(fmt::format("megamoe: path '{}', expected auto, portable, tensor_core or hopper", name));
}

std::string_view to_string(CombineWire wire) {
  return wire == CombineWire::bf16 ? "bf16" : "fp8_blockwise_1x32";
}

std::string_view to_string(XScale x) { return x == XScale::per_block ? "block" : "row"; }
std::string_view to_string(HScale h) { return h == HScale::per_block ? "block" : "static"; }

// |min over x of x sigmoid(x)| (0.278465 at x = -1.278465), rounded up.
constexpr float kSiluLeast = 0.2785f;

bool stage_promotes(const BucketConfig& b, int stage) {
  return stage == 1 ? b.x_scale != XScale::per_row : b.h_scale != HScale::static_bound;
}

float activation_bound(const Activation& a) {
  switch (a.kind) {
    case ActivationKind::silu: return INFINITY;
    case ActivationKind::situv2: return a.beta * a.linear_beta;
    case ActivationKind::swiglu: {  // x sigmoid(alpha x) rises from its least value to min(g, limit) = limit
      const double gate = std::fmax(a.limit / (1.0 + std::exp(-double(a.alpha) * a.limit)), kSiluLeast / a.alpha);
      return float(gate * (a.limit + std::fabs(a.up_offset)) * (1 + 1e-6));  // reached at the clamp: fp32 rounds within ulps of it
    }
  }
  return INFINITY;
}

std::string_view to_string(WeightSource weights) {
  return weights == WeightSource::mxfp4 ? "mxfp4" : "fp8_resident";
}

}  // namespace megamoe
