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

LayerOutputs reference_layer(const LayerInputs& in, const std::vector<std::int64_t>& tokens, int threads) {
  // At the path's shape: zero weight rows and columns, x's padding zero (padded_weights.hpp).
  const Mxfp4ExpertWeights& given = *in.weights;
  const bool pads = in.model_dim > given.model_dim || in.inter_dim > given.inter_dim;
  const Mxfp4ExpertWeights padded = pads ? pad_expert_weights(given, std::max(in.model_dim, given.model_dim),
                                                              std::max(in.inter_dim, given.inter_dim))
                                         : Mxfp4ExpertWeights{};
  const Mxfp4ExpertWeights& w = pads ? padded : given;
  const int S = in.shared ? in.shared->experts : 0;
  if (in.shared && (in.shared->model_dim != given.model_dim || in.shared->inter_dim != given.inter_dim ||
                    in.shared->has_biases() != given.has_biases()))
    throw Error(fmt::format("megamoe: reference: shared experts of {} x {} ({} biases), the routed ones {} x {} ({})",
                            in.shared->model_dim, in.shared->inter_dim, in.shared->has_biases() ? "with" : "no",
                            given.model_dim, given.inter_dim, given.has_biases() ? "with" : "no"));
  const Mxfp4ExpertWeights padded_shared =
      pads && in.shared ? pad_expert_weights(*in.shared, w.model_dim, w.inter_dim) : Mxfp4ExpertWeights{};
  const Mxfp4ExpertWeights* shared = pads && in.shared ? &padded_shared : in.shared;
  const int E = in.experts > 0 ? std::min(in.experts, w.experts) : w.experts, D = w.model_dim, I = w.inter_dim,
            K = in.topk + S, Dy = given.model_dim;  // K: a token's rows, routed then shared; Dy: x's and y's rows
  const bool biased = w.has_biases();
  const std::size_t n_rows = tokens.size();

  // Each (token, k) pair, grouped by expert: routed experts 0..E-1, shared ones E..E+S-1.
  std::vector<std::vector<Pair>> by_expert(E + S);
  for (std::size_t r = 0; r < n_rows; ++r) {
    const std::int64_t t = tokens[r];
    for (int k = 0; k < in.topk; ++k) {
      int id = in.ids[t * in.topk + k];
      if (id >= 0 && id < E) by_expert[id].push_back({r * K + k, t, in.route_weights[t * in.topk + k]});
    }
    for (int j = 0; j < S; ++j) by_expert[E + j].push_back({r * K + in.topk + j, t, in.shared_scale});
  }

  // The per-token inputs, exact and through the dispatch quantizer.
  std::vector<std::vector<float>> x_exact(n_rows), x_emul(n_rows);
  for (std::size_t r = 0; r < n_rows; ++r) {
    x_exact[r].assign(D, 0.f);
    for (int d = 0; d < Dy; ++d) x_exact[r][d] = formats::bf16_to_float(in.x[tokens[r] * Dy + d]);
    x_emul[r] = fp8_round_trip(x_exact[r], in.x_block);
  }
  auto position = [&](const Pair& p) { return p.out_row / K; };
  const float bound = activation_bound(in.activation);
  if (in.h_static && !std::isfinite(bound))
    throw Error(fmt::format("megamoe: reference: a static h scale needs a bounded activation, and {} has no bound",
                            to_string(in.activation.kind)));
  const int h_exponent = in.h_static ? formats::fp8_block_exponent(bound) : 0;

  // Per pair outputs (already route-weighted), summed per token afterwards in k order; and how far
  // the h flips the kernels' activations can make (h_flips.hpp) may move each.
  std::vector<float> pair_exact(n_rows * K * D, 0.f), pair_emul(n_rows * K * D, 0.f), pair_reach(n_rows * K * D, 0.f);
  std::atomic<std::size_t> h_near_boundary{0};

  std::atomic<int> next{0};
  const Mxfp4ExpertWeights& w_routed = w;
  auto worker = [&] {
    std::vector<float> w1(std::size_t(2) * I * D), w2(std::size_t(D) * I);
    // Per pair of a block: the exact, emulated and quantized intermediate, and the emulated output row.
    std::vector<std::vector<float>> h_exact(kPairBlock, std::vector<float>(I)), h_emul(kPairBlock, std::vector<float>(I)),
        g_emul(kPairBlock, std::vector<float>(I));
    std::vector<std::vector<HFlip>> flips(kPairBlock);
    std::vector<std::vector<float>> hq(kPairBlock), o_emul(kPairBlock, std::vector<float>(D));
    for (int ex; (ex = next++) < E + S;) {
      const std::vector<Pair>& pairs = by_expert[ex];
      if (pairs.empty()) continue;
      const Mxfp4ExpertWeights& w = ex < E ? w_routed : *shared;  // the expert's weights, at index e there
      const int e = ex < E ? ex : ex - E;
      formats::dequantize_mxfp4(w.w1_packed.data() + std::size_t(e) * I * D, w.w1_scales.data() + std::size_t(e) * 2 * I * D / 32,
                                w1.size(), w1.data());
      formats::dequantize_mxfp4(w.w2_packed.data() + std::size_t(e) * D * I / 2, w.w2_scales.data() + std::size_t(e) * D * I / 32,
                                w2.size(), w2.data());
      for (std::size_t p0 = 0; p0 < pairs.size(); p0 += kPairBlock) {
        const int n = int(std::min<std::size_t>(kPairBlock, pairs.size() - p0));
        // Stage1: each weight row against the block's x, exact and through the quantizer.
        const float* xs[kDotRows];
        for (int j = 0; j < n; ++j) {
          const Pair& p = pairs[p0 + j];
          xs[2 * j] = x_exact[position(p)].data(), xs[2 * j + 1] = x_emul[position(p)].data();
        }
        double gate[kDotRows], up[kDotRows];
        for (int i = 0; i < I; ++i) {
          pair_sums(n, w1.data() + std::size_t(i) * D, xs, D, in.accumulation, in.x_block, gate);
          pair_sums(n, w1.data() + std::size_t(I + i) * D, xs, D, in.accumulation, in.x_block, up);
          // The biases are added in fp32 to the sums, as the kernels' epilogues add them.
          const float bg = biased ? w.b1[std::size_t(e) * 2 * I + i] : 0.f;
          const float bu = biased ? w.b1[std::size_t(e) * 2 * I + I + i] : 0.f;
          for (int j = 0; j < n; ++j) {
            h_exact[j][i] = activation(in.activation, float(gate[2 * j]) + bg, float(up[2 * j]) + bu);
            g_emul[j][i] = float(gate[2 * j + 1]) + bg;
            h_emul[j][i] = activation(in.activation, g_emul[j][i], float(up[2 * j + 1]) + bu);
          }
        }
        // Stage2: each W2 row against the block's exact h and quantized h.
        const float* hs[kDotRows];
        for (int j = 0; j < n; ++j) {
          hq[j] = in.h_static ? fp8_round_trip_static(h_emul[j], h_exponent) : fp8_round_trip(h_emul[j], in.h_block);
          flips[j] = h_flips(h_emul[j], g_emul[j], in.h_block, in.h_static, h_exponent);
          h_near_boundary += flips[j].size();
        }
        for (int j = 0; j < n; ++j) hs[2 * j] = h_exact[j].data(), hs[2 * j + 1] = hq[j].data();
        double out[kDotRows];
        for (int d = 0; d < D; ++d) {
          pair_sums(n, w2.data() + std::size_t(d) * I, hs, I, in.accumulation, in.h_static ? I : in.h_block, out);
          const float b = biased ? w.b2[std::size_t(e) * D + d] : 0.f;
          for (int j = 0; j < n; ++j) {
            const Pair& p = pairs[p0 + j];
            pair_exact[p.out_row * D + d] = (float(out[2 * j]) + b) * p.weight;
            o_emul[j][d] = (float(out[2 * j + 1]) + b) * p.weight;  // the route weight is applied before the wire
            double reach = 0;
            for (const HFlip& f : flips[j]) reach += std::fabs(double(w2[std::size_t(d) * I + f.index])) * f.reach;
            pair_reach[p.out_row * D + d] = float(reach * std::fabs(p.weight));
          }
        }
        for (int j = 0; j < n; ++j) {
          float* out_emul = pair_emul.data() + pairs[p0 + j].out_row * D;
          if (in.wire == CombineWire::bf16) {
            for (int d = 0; d < D; ++d) out_emul[d] = formats::bf16_to_float(formats::float_to_bf16(o_emul[j][d]));
          } else {
            std::vector<float> wire = fp8_round_trip(o_emul[j], 32);
            std::copy(wire.begin(), wire.end(), out_emul);
          }
        }
      }
    }
  };
  int n = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  LayerOutputs out;
  out.exact.assign(n_rows * Dy, 0.f);
  out.emulated.assign(n_rows * Dy, 0.f);
  out.flip_reach.assign(n_rows * Dy, 0.f);
  out.h_near_boundary = h_near_boundary;
  std::vector<int> node_of(K, -1);  // over nodes: the node serving a routed slot, where it is not home
  for (std::size_t r = 0; r < n_rows; ++r) {
    for (int k = 0; k < in.topk; ++k) {
      const int id = in.ids[tokens[r] * in.topk + k];
      const int node = in.slot_nodes ? in.slot_nodes[tokens[r] * in.topk + k] : -1;
      node_of[k] = id >= 0 && id < E && node >= 0 && node != in.home_nodes[tokens[r]] ? node : -1;
    }
    for (int d = 0; d < Dy; ++d) {
      double se = 0, reach = 0;
      float sq = 0.f;
      for (int k = 0; k < K; ++k) {
        se += pair_exact[(r * K + k) * D + d];
        reach += pair_reach[(r * K + k) * D + d];
        const int node = node_of[k];
        if (node < 0) {
          sq += pair_emul[(r * K + k) * D + d];  // fp32, in k order, as the combine does
          continue;
        }
        if (std::find(node_of.begin(), node_of.begin() + k, node) != node_of.begin() + k) continue;
        float part = 0.f;  // the node's slots summed there in k order, sent home in bf16
        for (int k2 = k; k2 < in.topk; ++k2)
          if (node_of[k2] == node) part += pair_emul[(r * K + k2) * D + d];
        sq += formats::bf16_to_float(formats::float_to_bf16(part));
      }
      out.exact[r * Dy + d] = float(se);
      out.emulated[r * Dy + d] = formats::bf16_to_float(formats::float_to_bf16(sq));
      out.flip_reach[r * Dy + d] = float(reach);
    }
  }
  return out;
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
