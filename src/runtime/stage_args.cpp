#include "runtime/stage_args.hpp"

namespace megamoe {

WeightForm weight_form(KernelPath path, WeightSource source) {
  if (path == KernelPath::portable) return WeightForm::layout_v1;  // the runtime keeps mxfp4 off Hopper
  return source == WeightSource::fp8_resident ? WeightForm::fp8_resident : WeightForm::layout_v3;
}

RoutedRows routed_rows(const Workspace& ws, int stage) {
  return RoutedRows{
      .expert_offsets = static_cast<const int*>(ws.expert_offsets.get()),
      .tile_offsets = static_cast<const int*>((stage == 1 ? ws.tile_offsets1 : ws.tile_offsets2).get()),
      .row_token = static_cast<const int*>(ws.row_token.get()),
      .row_slot = static_cast<const int*>(ws.row_slot.get()),
      .row_weight = static_cast<const float*>(ws.row_weight.get()),
      .rows_pad = ws.rows_pad,
      .rows_capacity = ws.rows_capacity,
  };
}

ExpertWeights expert_weights(const PreparedWeights& w, const ModelShape& m, int gemm, WeightForm form) {
  const bool first = gemm == 1;
  const DeviceBuffer* data = nullptr;
  const DeviceBuffer* block_scales = nullptr;
  const DeviceBuffer* row_scale = nullptr;
  switch (form) {
    case WeightForm::layout_v1:
      data = first ? &w.w1_packed : &w.w2_packed, block_scales = first ? &w.w1_scales : &w.w2_scales;
      break;
    case WeightForm::layout_v3:
      data = first ? &w.w1_units : &w.w2_units, row_scale = first ? &w.w1_row_scale : &w.w2_row_scale;
      break;
    case WeightForm::fp8_resident:  // the e4m3 copy keeps layout v3's row scales
      data = first ? &w.w1_resident : &w.w2_resident, row_scale = first ? &w.w1_row_scale : &w.w2_row_scale;
      break;
  }
  return ExpertWeights{
      .data = static_cast<const u8*>(data->get()),
      .block_scales = block_scales ? static_cast<const u8*>(block_scales->get()) : nullptr,
      .row_scale = row_scale ? static_cast<const float*>(row_scale->get()) : nullptr,
      .bias = static_cast<const float*>((first ? w.b1 : w.b2).get()),
      .experts = m.experts_per_rank,
      .model_dim = m.model_dim,
      .inter_dim = m.inter_dim,
  };
}

ErrorWords error_words(const Workspace& ws) { return ErrorWords{.words = static_cast<int*>(ws.errors.get())}; }

}  // namespace megamoe
