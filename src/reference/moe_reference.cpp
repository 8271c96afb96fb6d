#include "reference/moe_reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "formats/formats.hpp"
#include "megamoe/errors.hpp"
#include "reference/activation_ref.hpp"
#include "reference/fp8_mma_model.hpp"
#include "reference/h_flips.hpp"
#include "weights/padded_weights.hpp"

namespace megamoe::reference {

namespace {

struct Pair {
  std::size_t out_row;  // index into the pair outputs: token position * topk + k
  std::int64_t token;
  float weight;
};

// v rounded through the fp8 block quantizer.
std::vector<float> fp8_round_trip(const std::vector<float>& v, int block) {
  std::vector<std::uint8_t> q(v.size()), s(v.size() / block);
  std::vector<float> out(v.size());
  formats::quantize_fp8_blocks(v.data(), v.size(), q.data(), s.data(), block);
  formats::dequantize_fp8_blocks(q.data(), s.data(), v.size(), out.data(), block);
  return out;
}

// v rounded through fp8 with the one scale 2^e.
std::vector<float> fp8_round_trip_static(const std::vector<float>& v, int e) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = fp8_held(v[i], e);
  return out;
}

// Pairs of one expert computed together, so that each weight row is read once per block.
constexpr int kPairBlock = 4, kDotRows = 2 * kPairBlock;

// out[r] = sum_k w[k] * v[r][k] for R vectors v, in double, over four interleaved partial sums
// per vector (independent chains the compiler vectorizes). len is a multiple of 32 (MXFP4
// blocks), and each vector's sums are the same whatever R is.
template <int R>
void dot_rows(const float* w, const float* const* v, int len, double* out) {
  double acc[R][4] = {};
  for (int k = 0; k < len; k += 4)
    for (int r = 0; r < R; ++r)
      for (int l = 0; l < 4; ++l) acc[r][l] += double(w[k + l]) * double(v[r][k + l]);
  for (int r = 0; r < R; ++r) out[r] = (acc[r][0] + acc[r][1]) + (acc[r][2] + acc[r][3]);
}

// The same for the counts pair_sums asks for: a block's n pairs (1 to 4) or both vectors of each
// (2 n).
void dot_vectors(int count, const float* w, const float* const* v, int len, double* out) {
  switch (count) {
    case 1: return dot_rows<1>(w, v, len, out);
    case 2: return dot_rows<2>(w, v, len, out);
    case 3: return dot_rows<3>(w, v, len, out);
    case 4: return dot_rows<4>(w, v, len, out);
    case 6: return dot_rows<6>(w, v, len, out);
    default: return dot_rows<8>(w, v, len, out);
  }
}

// A block of n pairs' sums against one weight row: v holds each pair's exact vector, then its
// emulated one (2 n vectors). The exact ones are summed in double; the emulated ones as the
// path sums: in double too, or as fp8 MMA chunks of `chunk` values added into an fp32 sum.
void pair_sums(int n, const float* w, const float* const* v, int len, Accumulation acc, int chunk, double* out) {
  if (acc == Accumulation::exact) return dot_vectors(2 * n, w, v, len, out);
  const float* exact[kDotRows] = {};
  double exact_out[kPairBlock];
  for (int j = 0; j < n; ++j) exact[j] = v[2 * j];
  dot_vectors(n, w, exact, len, exact_out);
  for (int j = 0; j < n; ++j) {
    float s = 0.f;
    for (int k = 0; k < len; k += chunk) s += fp8_mma_chunk(w + k, v[2 * j + 1] + k, chunk);
    out[2 * j] = exact_out[j], out[2 * j + 1] = s;
  }
}

}  // namespace

namespace {

// One reference_layer call's inputs at the path's shape (zero weight rows and columns, x's
// padding zero: padded_weights.hpp), and its per-pair results (route-weighted, summed per token
// afterwards in k order), which the experts' workers fill.
struct Call {
  const LayerInputs& in;
  const std::vector<std::int64_t>& tokens;
  Mxfp4ExpertWeights padded, padded_shared;  // where the path pads
  const Mxfp4ExpertWeights* routed = nullptr;
  const Mxfp4ExpertWeights* shared = nullptr;
  int E = 0, S = 0, D = 0, I = 0, K = 0, Dy = 0;  // K: a token's rows, routed then shared; Dy: x's and y's rows
  bool biased = false;
  int h_exponent = 0;
  std::vector<std::vector<Pair>> by_expert;  // each (token, k) pair by expert: routed 0..E-1, shared E..E+S-1
  std::vector<std::vector<float>> x_exact, x_emul;  // per token position: exact, and through the dispatch quantizer
  // How far the h flips the kernels' activations can make (h_flips.hpp) may move each output.
  std::vector<float> pair_exact, pair_emul, pair_reach;
  std::atomic<std::size_t> h_near_boundary{0};

  Call(const LayerInputs& in_, const std::vector<std::int64_t>& tokens_) : in(in_), tokens(tokens_) {}
  std::size_t rows() const { return tokens.size(); }
};

void shape_weights(Call& c) {
  const LayerInputs& in = c.in;
  const Mxfp4ExpertWeights& given = *in.weights;
  if (in.shared && (in.shared->model_dim != given.model_dim || in.shared->inter_dim != given.inter_dim ||
                    in.shared->has_biases() != given.has_biases()))
    throw Error(fmt::format("megamoe: reference: shared experts of {} x {} ({} biases), the routed ones {} x {} ({})",
                            in.shared->model_dim, in.shared->inter_dim, in.shared->has_biases() ? "with" : "no",
                            given.model_dim, given.inter_dim, given.has_biases() ? "with" : "no"));
  const bool pads = in.model_dim > given.model_dim || in.inter_dim > given.inter_dim;
  c.routed = &given, c.shared = in.shared;
  if (pads) {
    c.padded = pad_expert_weights(given, std::max(in.model_dim, given.model_dim), std::max(in.inter_dim, given.inter_dim));
    c.routed = &c.padded;
    if (in.shared) c.padded_shared = pad_expert_weights(*in.shared, c.padded.model_dim, c.padded.inter_dim);
    if (in.shared) c.shared = &c.padded_shared;
  }
  const Mxfp4ExpertWeights& w = *c.routed;
  c.S = in.shared ? in.shared->experts : 0;
  c.E = in.experts > 0 ? std::min(in.experts, w.experts) : w.experts;
  c.D = w.model_dim, c.I = w.inter_dim, c.K = in.topk + c.S, c.Dy = given.model_dim;
  c.biased = w.has_biases();
  const float bound = activation_bound(in.activation);
  if (in.h_static && !std::isfinite(bound))
    throw Error(fmt::format("megamoe: reference: a static h scale needs a bounded activation, and {} has no bound",
                            to_string(in.activation.kind)));
  c.h_exponent = in.h_static ? formats::fp8_block_exponent(bound) : 0;
}

void group_pairs(Call& c) {
  const LayerInputs& in = c.in;
  c.by_expert.assign(c.E + c.S, {});
  for (std::size_t r = 0; r < c.rows(); ++r) {
    const std::int64_t t = c.tokens[r];
    for (int k = 0; k < in.topk; ++k) {
      int id = in.ids[t * in.topk + k];
      if (id >= 0 && id < c.E) c.by_expert[id].push_back({r * c.K + k, t, in.route_weights[t * in.topk + k]});
    }
    for (int j = 0; j < c.S; ++j) c.by_expert[c.E + j].push_back({r * c.K + in.topk + j, t, in.shared_scale});
  }
}

void token_inputs(Call& c) {
  c.x_exact.assign(c.rows(), {});
  c.x_emul.assign(c.rows(), {});
  for (std::size_t r = 0; r < c.rows(); ++r) {
    c.x_exact[r].assign(c.D, 0.f);
    for (int d = 0; d < c.Dy; ++d) c.x_exact[r][d] = formats::bf16_to_float(c.in.x[c.tokens[r] * c.Dy + d]);
    c.x_emul[r] = fp8_round_trip(c.x_exact[r], c.in.x_block);
  }
  const std::size_t outputs = c.rows() * c.K * c.D;
  c.pair_exact.assign(outputs, 0.f), c.pair_emul.assign(outputs, 0.f), c.pair_reach.assign(outputs, 0.f);
}

// One thread's experts: each expert's weights dequantized once, its pairs taken kPairBlock at a
// time through Stage1, the activation, h's quantizer, Stage2 and the combine wire.
class ExpertWorker {
 public:
  explicit ExpertWorker(Call& c)
      : c_(c), w1_(std::size_t(2) * c.I * c.D), w2_(std::size_t(c.D) * c.I),
        h_exact_(kPairBlock, std::vector<float>(c.I)), h_emul_(kPairBlock, std::vector<float>(c.I)),
        g_emul_(kPairBlock, std::vector<float>(c.I)), flips_(kPairBlock), hq_(kPairBlock),
        o_emul_(kPairBlock, std::vector<float>(c.D)) {}

  void expert(int ex) {
    const std::vector<Pair>& pairs = c_.by_expert[ex];
    if (pairs.empty()) return;
    const Mxfp4ExpertWeights& w = ex < c_.E ? *c_.routed : *c_.shared;  // the expert's weights, at index e there
    const int e = ex < c_.E ? ex : ex - c_.E;
    const std::size_t I = c_.I, D = c_.D;
    formats::dequantize_mxfp4(w.w1_packed.data() + std::size_t(e) * I * D, w.w1_scales.data() + std::size_t(e) * 2 * I * D / 32,
                              w1_.size(), w1_.data());
    formats::dequantize_mxfp4(w.w2_packed.data() + std::size_t(e) * D * I / 2, w.w2_scales.data() + std::size_t(e) * D * I / 32,
                              w2_.size(), w2_.data());
    for (std::size_t p0 = 0; p0 < pairs.size(); p0 += kPairBlock) {
      const int n = int(std::min<std::size_t>(kPairBlock, pairs.size() - p0));
      stage1(pairs.data() + p0, n, w, e);
      stage2(pairs.data() + p0, n, w, e);
      wire(pairs.data() + p0, n);
    }
  }

 private:
  // Each weight row against the block's x, exact and through the quantizer; the biases added in
  // fp32 to the sums, as the kernels' epilogues add them.
  void stage1(const Pair* pairs, int n, const Mxfp4ExpertWeights& w, int e) {
    const LayerInputs& in = c_.in;
    const int I = c_.I, D = c_.D;
    const float* xs[kDotRows];
    for (int j = 0; j < n; ++j) {
      const std::size_t position = pairs[j].out_row / c_.K;
      xs[2 * j] = c_.x_exact[position].data(), xs[2 * j + 1] = c_.x_emul[position].data();
    }
    double gate[kDotRows], up[kDotRows];
    for (int i = 0; i < I; ++i) {
      pair_sums(n, w1_.data() + std::size_t(i) * D, xs, D, in.accumulation, in.x_block, gate);
      pair_sums(n, w1_.data() + std::size_t(I + i) * D, xs, D, in.accumulation, in.x_block, up);
      const float bg = c_.biased ? w.b1[std::size_t(e) * 2 * I + i] : 0.f;
      const float bu = c_.biased ? w.b1[std::size_t(e) * 2 * I + I + i] : 0.f;
      for (int j = 0; j < n; ++j) {
        h_exact_[j][i] = activation(in.activation, float(gate[2 * j]) + bg, float(up[2 * j]) + bu);
        g_emul_[j][i] = float(gate[2 * j + 1]) + bg;
        h_emul_[j][i] = activation(in.activation, g_emul_[j][i], float(up[2 * j + 1]) + bu);
      }
    }
  }

  // Each W2 row against the block's exact h and quantized h; the route weight is applied before
  // the wire.
  void stage2(const Pair* pairs, int n, const Mxfp4ExpertWeights& w, int e) {
    const LayerInputs& in = c_.in;
    const int I = c_.I, D = c_.D;
    const float* hs[kDotRows];
    for (int j = 0; j < n; ++j) {
      hq_[j] = in.h_static ? fp8_round_trip_static(h_emul_[j], c_.h_exponent) : fp8_round_trip(h_emul_[j], in.h_block);
      flips_[j] = h_flips(h_emul_[j], g_emul_[j], in.h_block, in.h_static, c_.h_exponent);
      c_.h_near_boundary += flips_[j].size();
    }
    for (int j = 0; j < n; ++j) hs[2 * j] = h_exact_[j].data(), hs[2 * j + 1] = hq_[j].data();
    double out[kDotRows];
    for (int d = 0; d < D; ++d) {
      pair_sums(n, w2_.data() + std::size_t(d) * I, hs, I, in.accumulation, in.h_static ? I : in.h_block, out);
      const float b = c_.biased ? w.b2[std::size_t(e) * D + d] : 0.f;
      for (int j = 0; j < n; ++j) {
        const Pair& p = pairs[j];
        c_.pair_exact[p.out_row * D + d] = (float(out[2 * j]) + b) * p.weight;
        o_emul_[j][d] = (float(out[2 * j + 1]) + b) * p.weight;
        double reach = 0;
        for (const HFlip& f : flips_[j]) reach += std::fabs(double(w2_[std::size_t(d) * I + f.index])) * f.reach;
        c_.pair_reach[p.out_row * D + d] = float(reach * std::fabs(p.weight));
      }
    }
  }

  // The emulated outputs through the combine wire.
  void wire(const Pair* pairs, int n) {
    const int D = c_.D;
    for (int j = 0; j < n; ++j) {
      float* out_emul = c_.pair_emul.data() + pairs[j].out_row * D;
      if (c_.in.wire == CombineWire::bf16) {
        for (int d = 0; d < D; ++d) out_emul[d] = formats::bf16_to_float(formats::float_to_bf16(o_emul_[j][d]));
      } else {
        std::vector<float> wire = fp8_round_trip(o_emul_[j], 32);
        std::copy(wire.begin(), wire.end(), out_emul);
      }
    }
  }

  Call& c_;
  std::vector<float> w1_, w2_;
  // Per pair of a block: the exact, emulated and quantized intermediate, and the emulated output row.
  std::vector<std::vector<float>> h_exact_, h_emul_, g_emul_;
  std::vector<std::vector<HFlip>> flips_;
  std::vector<std::vector<float>> hq_, o_emul_;
};

void run_experts(Call& c, int threads) {
  std::atomic<int> next{0};
  auto work = [&] {
    ExpertWorker worker(c);
    for (int ex; (ex = next++) < c.E + c.S;) worker.expert(ex);
  };
  const int n = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back(work);
  for (auto& t : pool) t.join();
}

// Over nodes: the node serving each routed slot of token position r where it is not home, else -1.
void slot_nodes_of(const Call& c, std::size_t r, std::vector<int>& node_of) {
  const LayerInputs& in = c.in;
  for (int k = 0; k < in.topk; ++k) {
    const int id = in.ids[c.tokens[r] * in.topk + k];
    const int node = in.slot_nodes ? in.slot_nodes[c.tokens[r] * in.topk + k] : -1;
    node_of[k] = id >= 0 && id < c.E && node >= 0 && node != in.home_nodes[c.tokens[r]] ? node : -1;
  }
}

// The emulated sum of one output: fp32 in k order, as the combine does; a node's slots summed
// there in k order and sent home in bf16, added at the node's first slot.
float emulated_sum(const Call& c, std::size_t r, int d, const std::vector<int>& node_of) {
  const int K = c.K, D = c.D;
  float sq = 0.f;
  for (int k = 0; k < K; ++k) {
    const int node = node_of[k];
    if (node < 0) {
      sq += c.pair_emul[(r * K + k) * D + d];
      continue;
    }
    if (std::find(node_of.begin(), node_of.begin() + k, node) != node_of.begin() + k) continue;
    float part = 0.f;
    for (int k2 = k; k2 < c.in.topk; ++k2)
      if (node_of[k2] == node) part += c.pair_emul[(r * K + k2) * D + d];
    sq += formats::bf16_to_float(formats::float_to_bf16(part));
  }
  return sq;
}

LayerOutputs combine(const Call& c) {
  const int K = c.K, D = c.D, Dy = c.Dy;
  LayerOutputs out;
  out.exact.assign(c.rows() * Dy, 0.f);
  out.emulated.assign(c.rows() * Dy, 0.f);
  out.flip_reach.assign(c.rows() * Dy, 0.f);
  out.h_near_boundary = c.h_near_boundary;
  std::vector<int> node_of(K, -1);
  for (std::size_t r = 0; r < c.rows(); ++r) {
    slot_nodes_of(c, r, node_of);
    for (int d = 0; d < Dy; ++d) {
      double se = 0, reach = 0;
      for (int k = 0; k < K; ++k) {
        se += c.pair_exact[(r * K + k) * D + d];
        reach += c.pair_reach[(r * K + k) * D + d];
      }
      out.exact[r * Dy + d] = float(se);
      out.emulated[r * Dy + d] = formats::bf16_to_float(formats::float_to_bf16(emulated_sum(c, r, d, node_of)));
      out.flip_reach[r * Dy + d] = float(reach);
    }
  }
  return out;
}

}  // namespace

LayerOutputs reference_layer(const LayerInputs& in, const std::vector<std::int64_t>& tokens, int threads) {
  Call c(in, tokens);
  shape_weights(c);
  group_pairs(c);
  token_inputs(c);
  run_experts(c, threads);
  return combine(c);
}

double rel_l2_beyond(const float* a, const float* b, const float* reach, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::max(0.0, std::fabs(double(a[i]) - b[i]) - reach[i]);
    num += d * d, den += double(b[i]) * b[i];
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

double rel_l2(const float* a, const float* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double d = double(a[i]) - b[i];
    num += d * d, den += double(b[i]) * b[i];
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

}  // namespace megamoe::reference
