// What every path's epilogues apply to an output besides the GEMM's sum, in one place: a feature
// each output carries (the expert biases) is an edit here, for every path at once. Stage1: an
// intermediate column's gate and up sums (already times their weight rows' scales) to h; Stage2:
// an output column's sum (likewise) to the value the wire takes, times the route weight. A column's
// terms are read once (stage1_column, stage2_column) and applied to each token row's sums.
#pragma once
#include "interface/kernel_args.cuh"

namespace megamoe {

// Output n of expert e's `outputs` (2 x inter_dim for W1, gate then up; model_dim for W2), or 0
// where the weights carry no biases (the pointer is uniform: every thread takes the same branch).
MM_DEVICE float expert_bias(const float* bias, int e, int outputs, int n) {
  return bias ? bias[(i64)e * outputs + n] : 0.f;
}

// Gate column `col` of an expert and its up column (col + inter_dim): added in fp32 to the sums
// before the activation, as the model adds them.
struct Stage1Column {
  float gate_bias, up_bias;
  template <class Act>
  MM_DEVICE float h(float gate, float up) const {
    return Act::apply(gate + gate_bias, up + up_bias);
  }
};
MM_DEVICE Stage1Column stage1_column(const ExpertWeights& w1, int e, int col) {
  const int outputs = 2 * w1.inter_dim;
  return {expert_bias(w1.bias, e, outputs, col), expert_bias(w1.bias, e, outputs, w1.inter_dim + col)};
}

// Output column `col` of an expert's W2: the bias added before the route weight.
struct Stage2Column {
  float bias;
  MM_DEVICE float out(float sum, float route_weight) const { return (sum + bias) * route_weight; }
};
MM_DEVICE Stage2Column stage2_column(const ExpertWeights& w2, int e, int col) {
  return {expert_bias(w2.bias, e, w2.model_dim, col)};
}

}  // namespace megamoe
