// The parts every stage kernel's arguments embed (interface/kernel_args.cuh), each filled by one
// function here: the routed rows, one GEMM's expert weights, the error words. Each launcher sets
// what differs between paths and ranks (x, the token and slot counts, the wire) itself.
#pragma once
#include "interface/kernel_args.cuh"
#include "megamoe/runtime.hpp"
#include "runtime/workspace.hpp"

namespace megamoe {

// The form of the weights a path's kernels read (PreparedWeights holds each where made).
enum class WeightForm { layout_v1, layout_v3, fp8_resident };
WeightForm weight_form(KernelPath path, WeightSource source);

// Stage 1 or 2's view of the routed layout (its own tile offsets).
RoutedRows routed_rows(const Workspace& ws, int stage);
// GEMM 1 (W1: gate and up) or 2 (W2: down).
ExpertWeights expert_weights(const PreparedWeights& w, const ModelShape& m, int gemm, WeightForm form);
ErrorWords error_words(const Workspace& ws);

// What Stage1 and Stage2 of every path take alike: the routed rows, the weights, h between them
// (its scales e8m0 bytes, or floats on the Hopper path: the structs say which), the error words.
template <class Stage1, class Stage2>
void fill_stage_parts(const ModelShape& m, const Workspace& ws, const PreparedWeights& w, WeightForm form, Stage1& s1,
                      Stage2& s2) {
  s1.rows = routed_rows(ws, 1), s2.rows = routed_rows(ws, 2);
  s1.w1 = expert_weights(w, m, 1, form), s2.w2 = expert_weights(w, m, 2, form);
  s1.h_q = static_cast<u8*>(ws.h_q.get());
  s1.h_scales = static_cast<decltype(s1.h_scales)>(ws.h_scales.get());
  s2.h_q = s1.h_q, s2.h_scales = s1.h_scales;
  s1.errors = s2.errors = error_words(ws);
}

}  // namespace megamoe
