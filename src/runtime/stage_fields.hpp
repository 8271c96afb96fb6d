// The fields of a path's Stage1 and Stage2 arguments that every launcher fills alike, on one rank
// or several: the routed layout (offsets and rows), the shape, h, the capacity, the error words;
// and the weights' (layout v1 or v3). What differs (x, token and slot counts, the wire) the
// launchers set themselves.
#pragma once
#include "interface/kernel_args.cuh"
#include "megamoe/runtime.hpp"
#include "runtime/workspace.hpp"

namespace megamoe {

template <class Stage1, class Stage2>
void fill_routed_fields(const ModelShape& m, Workspace& ws, Stage1& s1, Stage2& s2) {
  s1.expert_offsets = s2.expert_offsets = static_cast<const int*>(ws.expert_offsets.get());
  s1.tile_offsets = static_cast<const int*>(ws.tile_offsets1.get());
  s2.tile_offsets = static_cast<const int*>(ws.tile_offsets2.get());
  s1.row_token = static_cast<const int*>(ws.row_token.get());
  s2.row_slot = static_cast<const int*>(ws.row_slot.get());
  s2.row_weight = static_cast<const float*>(ws.row_weight.get());
  s1.experts = s2.experts = m.experts_per_rank;
  s1.model_dim = s2.model_dim = m.model_dim;
  s1.inter_dim = s2.inter_dim = m.inter_dim;
  // h's scales are e8m0 bytes (portable, tensor-core) or floats (Hopper): the structs say which.
  s1.h_q = static_cast<u8*>(ws.h_q.get());
  s1.h_scales = static_cast<decltype(s1.h_scales)>(ws.h_scales.get());
  s2.h_q = s1.h_q, s2.h_scales = s1.h_scales;
  s1.rows_capacity = s2.rows_capacity = ws.rows_capacity;
  s1.errors = s2.errors = static_cast<int*>(ws.errors.get());
}

inline void fill_weights(const PreparedWeights& w, Stage1PortableArgs& s1, Stage2PortableArgs& s2,
                         WeightSource = WeightSource::mxfp4) {  // layout v1 (the runtime keeps mxfp4 off Hopper)
  s1.w1_packed = static_cast<const u8*>(w.w1_packed.get());
  s1.w1_scales = static_cast<const u8*>(w.w1_scales.get());
  s2.w2_packed = static_cast<const u8*>(w.w2_packed.get());
  s2.w2_scales = static_cast<const u8*>(w.w2_scales.get());
}
// Layout v3, or (weights fp8_resident, the Hopper kernels) the e4m3 copy with v3's row scales.
template <class Stage1, class Stage2>
void fill_weights(const PreparedWeights& w, Stage1& s1, Stage2& s2, WeightSource weights = WeightSource::mxfp4) {
  const bool resident = weights == WeightSource::fp8_resident;
  s1.w1_units = static_cast<const u8*>(resident ? w.w1_resident.get() : w.w1_units.get());
  s1.w1_row_scale = static_cast<const float*>(w.w1_row_scale.get());
  s2.w2_units = static_cast<const u8*>(resident ? w.w2_resident.get() : w.w2_units.get());
  s2.w2_row_scale = static_cast<const float*>(w.w2_row_scale.get());
}

}  // namespace megamoe
