// The CPU references of the whole layer, in fp32 (accumulating in double):
//  - exact:    y[t] = sum_k w[t,k] * (W2_e act(W1gate_e x + b1gate_e, W1up_e x + b1up_e) + b2_e),
//              from the MXFP4-dequantized weights and the unquantized bf16 x; no other rounding
//              (the biases where the weights carry them).
//  - emulated: the same with the op's own quantizers at the op's points: x in fp8 blocks of
//              x_block values (dispatch), the intermediate in blocks of h_block, the route-weighted Stage2 row on
//              the combine wire (bf16, or fp8 1x32 blocks), the k rows summed in fp32 in k order
//              (over nodes, another node's rows first summed there, in bf16: slot_nodes),
//              and y rounded to bf16; the two GEMMs summed as the path's matrix instructions sum
//              (exact, or sm_90's fp8 MMA promoted per scale block: fp8_mma_model.hpp), at the
//              path's shape (weights and x padded with zeros as the kernels run them). The
//              activations in fp32 from libm: the kernels' own are a few ulp away, and where that
//              can move an h value to the next fp8 step, flip_reach says how far y may move.
// Shared experts (LayerInputs::shared) are more rows of every token, after its k routed ones, with
// weight shared_scale; rounded as the routed rows are.
// Slots with id -1, or any id outside [0, experts), contribute nothing (experts: the weights', or
// fewer: a group's experts when the weights hold more).
#pragma once
#include <cstdint>
#include <vector>

#include "megamoe/config.hpp"
#include "megamoe/weights.hpp"

namespace megamoe::reference {

struct LayerInputs {
  const Mxfp4ExpertWeights* weights = nullptr;
  Activation activation;
  CombineWire wire = CombineWire::bf16;
  int x_block = 32, h_block = 32;  // values per fp8 scale of x and of the intermediate (Runtime::arithmetic)
  // The path's shape (PathArithmetic::model_dim, inter_dim): the weights and x padded with zeros to
  // it; 0 or the weights' own: none. The outputs keep the weights' model_dim.
  int model_dim = 0, inter_dim = 0;
  // The intermediate in one static fp8 scale from the activation's bound (activation_bound)
  // instead of per h_block, and Stage2's sums with no promotion (one chunk over inter_dim).
  bool h_static = false;
  Accumulation accumulation = Accumulation::exact;  // how the emulated GEMMs sum (Runtime::arithmetic)
  int topk = 0;
  const std::uint16_t* x = nullptr;   // [tokens][model_dim] bf16
  const int* ids = nullptr;           // [tokens][topk]
  const float* route_weights = nullptr;  // [tokens][topk]
  int experts = 0;                       // ids at or past it are bad: skipped (0: weights->experts)
  // The model's shared experts (the weights' shape), or null: every token's sum adds each of them,
  // weighted shared_scale, after its topk routed rows (as the kernels' combine sums them).
  const Mxfp4ExpertWeights* shared = nullptr;
  float shared_scale = 1.f;
  // Over nodes (the nvshmem transport across nodes): the node serving each slot ([tokens][topk],
  // -1 none) and each token's home node ([tokens]); a token's slots on a node other than its
  // home are summed there in fp32 in k order, rounded to bf16, and that sum added where the
  // node's first slot is. Null: every slot on its own.
  const int* slot_nodes = nullptr;
  const int* home_nodes = nullptr;
};

struct LayerOutputs {
  std::vector<float> exact;     // [rows.size()][model_dim]
  std::vector<float> emulated;  // [rows.size()][model_dim], values of bf16
  // [rows.size()][model_dim]: how far the kernels' output may lie from `emulated` through h values
  // the activations' error can round to the next fp8 step (h_flips.hpp): the sum over the pairs
  // of |W2| times each such value's reach, route-weighted. 0 where no h value is in reach of a
  // boundary. The wire's and y's roundings of a moved value are the bars' (workload.hpp).
  std::vector<float> flip_reach;
  std::size_t h_near_boundary = 0;  // h values (over all pairs) that the activations' error can move
};

// Computes both references for the listed tokens, on `threads` threads (0: all cores).
LayerOutputs reference_layer(const LayerInputs& in, const std::vector<std::int64_t>& tokens, int threads = 0);

// ||a - b|| / ||b|| over all elements.
double rel_l2(const float* a, const float* b, std::size_t n);
// The same with each |a_i - b_i| less reach_i first (at least 0): what is left past the h flips
// that the reference cannot decide (LayerOutputs::flip_reach).
double rel_l2_beyond(const float* a, const float* b, const float* reach, std::size_t n);

}  // namespace megamoe::reference
