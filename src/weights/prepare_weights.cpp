// Weight preparation: the shape checked, then the layout of the runtime's path uploaded.
#include "weights/prepare_weights.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "config/path_requirements.hpp"

#include "weights/fp8_resident_layout.hpp"
#include "weights/padded_weights.hpp"
#include "weights/tensor_core_layout.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

void settle_weight_sources(Config& config, KernelPath path, bool fp8_resident_weights) {
  if (path != KernelPath::hopper || !fp8_resident_weights)
    for (BucketConfig& b : config.buckets) b.weights = WeightSource::mxfp4;
}

bool needs_fp8_resident_copy(const Config& config, int max_tokens) {
  const int top = config.table_key(max_tokens);
  return std::any_of(config.buckets.begin(), config.buckets.end(), [&](const BucketConfig& b) {
    return b.bucket <= top && b.weights == WeightSource::fp8_resident;
  });
}

std::size_t PreparedWeights::bytes() const {
  std::size_t n = 0;
  for (const DeviceBuffer* b : {&w1_packed, &w1_scales, &w2_packed, &w2_scales, &w1_units, &w1_row_scale, &w2_units,
                                &w2_row_scale, &w1_resident, &w2_resident, &b1, &b2})
    n += b->bytes();
  return n;
}

std::size_t prepared_weights_bytes(const Config& config, KernelPath path, int max_tokens) {
  const ModelShape& m = config.model;
  const ModelShape k = padded_model(path, m);  // the buffers hold the path's shape
  const std::size_t E = std::size_t(m.experts_per_rank + m.shared_experts), D = k.model_dim, I = k.inter_dim;
  const std::size_t biases = m.expert_biases ? E * (2 * I + D) * 4 : 0;
  if (path == KernelPath::portable)  // v1: packed values and one e8m0 per 32, both matrices
    return biases + E * (2 * I * D + D * I) * (16 + 1) / 32;
  std::size_t bytes = biases + E * (tensor_core_expert_bytes(int(2 * I), int(D)) + tensor_core_expert_bytes(int(D), int(I)));
  bytes += E * (2 * I + D) * sizeof(float);  // the row scales
  if (needs_fp8_resident_copy(config, max_tokens))
    bytes += E * (fp8_resident_expert_bytes(int(2 * I), int(D)) + fp8_resident_expert_bytes(int(D), int(I)));
  return bytes;
}

std::unique_ptr<PreparedWeights> prepare_weights(Device& device, const Config& config, KernelPath path, int max_tokens,
                                                 const Mxfp4ExpertWeights& w, bool replacement) {
  w.check();
  const ModelShape& m = config.model;
  auto expect = [&](const char* field, int got, int want, const char* config_field) {
    if (got != want)
      throw Error(fmt::format("megamoe: weights.{} = {}, expected {} (config {} {})", field, got, want, config.name,
                              config_field));
  };
  const std::string held =
      m.shared_experts ? fmt::format("model.experts {} over world {}: a rank's, and model.shared_experts {}", m.experts,
                                     config.world, m.shared_experts)
                       : fmt::format("model.experts {} over world {}: a rank's", m.experts, config.world);
  if (replacement && w.experts < 1)
    throw Error(fmt::format("megamoe: replacement weights.experts = {}, expected at least 1", w.experts));
  if (!replacement) expect("experts", w.experts, m.experts_per_rank + m.shared_experts, held.c_str());
  expect("model_dim", w.model_dim, m.model_dim, "model.model_dim");
  expect("inter_dim", w.inter_dim, m.inter_dim, "model.inter_dim");
  if (w.has_biases() != m.expert_biases)
    throw Error(fmt::format("megamoe: weights {} expert biases (b1, b2), and config {} says model.expert_biases {}",
                            w.has_biases() ? "carry" : "lack", config.name, m.expert_biases));
  auto p = std::make_unique<PreparedWeights>();
  p->path = path;
  p->experts = w.experts, p->model_dim = w.model_dim, p->inter_dim = w.inter_dim;
  // A rank's shared experts come after its routed ones here and first in the kernels' slots
  // (config/shared_slots.hpp): every buffer is expert-major, so each is uploaded rotated by the
  // routed experts, with no reordered host copy.
  const std::size_t rotate = m.shared_experts > 0 && !replacement ? std::size_t(m.experts_per_rank) : 0;
  auto upload = [&](const auto& host) {
    const std::size_t bytes = host.size() * sizeof(host[0]);
    DeviceBuffer b(device, bytes);
    const auto* from = reinterpret_cast<const std::uint8_t*>(host.data());
    const std::size_t head = rotate * (bytes / std::size_t(w.experts));  // the routed experts' bytes
    device.copy_to_device(b.get(), from + head, bytes - head);
    if (head) device.copy_to_device(static_cast<std::uint8_t*>(b.get()) + (bytes - head), from, head);
    return b;
  };
  // The path's own shape: zero rows and columns where the model's dims miss its multiple.
  const ModelShape shape = padded_model(path, m);
  Mxfp4ExpertWeights padded;
  const bool pads = shape.model_dim != m.model_dim || shape.inter_dim != m.inter_dim;
  if (pads) padded = pad_expert_weights(w, shape.model_dim, shape.inter_dim);
  const Mxfp4ExpertWeights& k = pads ? padded : w;
  if (k.has_biases()) p->b1 = upload(k.b1), p->b2 = upload(k.b2);  // none: null pointers in the kernels' args
  if (path == KernelPath::portable) {  // layout v1: the checkpoint layout itself
    p->w1_packed = upload(k.w1_packed);
    p->w1_scales = upload(k.w1_scales);
    p->w2_packed = upload(k.w2_packed);
    p->w2_scales = upload(k.w2_scales);
    return p;
  }
  const bool resident = needs_fp8_resident_copy(config, max_tokens);
  TensorCoreWeights w1 = to_tensor_core_layout(k.w1_packed.data(), k.w1_scales.data(), k.experts, 2 * k.inter_dim,
                                               k.model_dim, true);
  p->w1_units = upload(w1.units), p->w1_row_scale = upload(w1.row_scale);
  p->flushed_w1 = w1.flushed_blocks;
  if (resident) p->w1_resident = upload(to_fp8_resident_layout(w1, k.experts, 2 * k.inter_dim, k.model_dim));
  w1 = {};
  TensorCoreWeights w2 = to_tensor_core_layout(k.w2_packed.data(), k.w2_scales.data(), k.experts, k.model_dim,
                                               k.inter_dim, false);
  p->w2_units = upload(w2.units), p->w2_row_scale = upload(w2.row_scale);
  p->flushed_w2 = w2.flushed_blocks;
  p->flushed_blocks = p->flushed_w1 + p->flushed_w2;
  if (resident) p->w2_resident = upload(to_fp8_resident_layout(w2, k.experts, k.model_dim, k.inter_dim));
  p->resident_bytes = p->w1_resident.bytes() + p->w2_resident.bytes();
  return p;
}

void copy_expert_slots(Device& device, PreparedWeights& w, const std::vector<int>& slots, const PreparedWeights& r,
                       StreamHandle stream) {
  for (DeviceBuffer PreparedWeights::*buffer :
       {&PreparedWeights::w1_packed, &PreparedWeights::w1_scales, &PreparedWeights::w2_packed, &PreparedWeights::w2_scales,
        &PreparedWeights::w1_units, &PreparedWeights::w1_row_scale, &PreparedWeights::w2_units,
        &PreparedWeights::w2_row_scale, &PreparedWeights::w1_resident, &PreparedWeights::w2_resident,
        &PreparedWeights::b1, &PreparedWeights::b2}) {
    const DeviceBuffer &to = w.*buffer, &from = r.*buffer;
    if (!to.get()) continue;  // a buffer this path's layout does not have
    // Every buffer is expert-major with the same bytes per expert (docs/layer.md, "Weights").
    const std::size_t per = to.bytes() / std::size_t(w.experts);
    for (std::size_t i = 0; i < slots.size(); ++i)
      device.copy_device_async(static_cast<char*>(to.get()) + std::size_t(slots[i]) * per,
                               static_cast<const char*>(from.get()) + i * per, per, stream);
  }
}

}  // namespace megamoe
