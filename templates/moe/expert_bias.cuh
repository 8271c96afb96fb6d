// An expert GEMM's bias (ExpertWeights::bias), added in fp32 to the sums before the activation
// (Stage1) or the route weight (Stage2), as the model adds it.
#pragma once
#include "interface/kernel_args.cuh"

namespace megamoe {

// Output n of expert e's `outputs` (2 x inter_dim for W1, gate then up; model_dim for W2), or 0
// where the weights carry no biases (the pointer is uniform: every thread takes the same branch).
MM_DEVICE float expert_bias(const float* bias, int e, int outputs, int n) {
  return bias ? bias[(i64)e * outputs + n] : 0.f;
}

}  // namespace megamoe
