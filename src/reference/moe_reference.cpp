#include "reference/moe_reference.hpp"

#include <atomic>
#include <cmath>
#include <thread>

#include "formats/formats.hpp"
#include "reference/activation_ref.hpp"

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

}  // namespace

LayerOutputs reference_layer(const LayerInputs& in, const std::vector<std::int64_t>& tokens, int threads) {
  const Mxfp4ExpertWeights& w = *in.weights;
  const int E = w.experts, D = w.model_dim, I = w.inter_dim, K = in.topk;
  const std::size_t n_rows = tokens.size();

  // Each routed (token, k) pair, grouped by expert.
  std::vector<std::vector<Pair>> by_expert(E);
  for (std::size_t r = 0; r < n_rows; ++r)
    for (int k = 0; k < K; ++k) {
      std::int64_t t = tokens[r];
      int id = in.ids[t * K + k];
      if (id >= 0 && id < E) by_expert[id].push_back({r * K + k, t, in.route_weights[t * K + k]});
    }

  // The per-token inputs, exact and through the dispatch quantizer.
  std::vector<std::vector<float>> x_exact(n_rows), x_emul(n_rows);
  for (std::size_t r = 0; r < n_rows; ++r) {
    x_exact[r].resize(D);
    for (int d = 0; d < D; ++d) x_exact[r][d] = formats::bf16_to_float(in.x[tokens[r] * D + d]);
    x_emul[r] = fp8_round_trip(x_exact[r], in.x_block);
  }
  auto position = [&](const Pair& p) { return p.out_row / K; };

  // Per pair outputs (already route-weighted), summed per token afterwards in k order.
  std::vector<float> pair_exact(n_rows * K * D, 0.f), pair_emul(n_rows * K * D, 0.f);

  std::atomic<int> next{0};
  auto worker = [&] {
    std::vector<float> w1(std::size_t(2) * I * D), w2(std::size_t(D) * I);
    std::vector<float> h_exact(I), h_emul(I), o_emul(D);
    for (int e; (e = next++) < E;) {
      if (by_expert[e].empty()) continue;
      formats::dequantize_mxfp4(w.w1_packed.data() + std::size_t(e) * I * D, w.w1_scales.data() + std::size_t(e) * 2 * I * D / 32,
                                w1.size(), w1.data());
      formats::dequantize_mxfp4(w.w2_packed.data() + std::size_t(e) * D * I / 2, w.w2_scales.data() + std::size_t(e) * D * I / 32,
                                w2.size(), w2.data());
      for (const Pair& p : by_expert[e]) {
        const float* xe = x_exact[position(p)].data();
        const float* xq = x_emul[position(p)].data();
        for (int i = 0; i < I; ++i) {
          const float* gate = w1.data() + std::size_t(i) * D;
          const float* up = w1.data() + std::size_t(I + i) * D;
          double ge = 0, ue = 0, gq = 0, uq = 0;
          for (int d = 0; d < D; ++d) {
            ge += double(gate[d]) * xe[d], ue += double(up[d]) * xe[d];
            gq += double(gate[d]) * xq[d], uq += double(up[d]) * xq[d];
          }
          h_exact[i] = activation(in.activation, float(ge), float(ue));
          h_emul[i] = activation(in.activation, float(gq), float(uq));
        }
        std::vector<float> hq = fp8_round_trip(h_emul, in.h_block);
        float* out_exact = pair_exact.data() + p.out_row * D;
        for (int d = 0; d < D; ++d) {
          const float* row = w2.data() + std::size_t(d) * I;
          double oe = 0, oq = 0;
          for (int i = 0; i < I; ++i) oe += double(row[i]) * h_exact[i], oq += double(row[i]) * hq[i];
          out_exact[d] = float(oe) * p.weight;
          o_emul[d] = float(oq) * p.weight;  // the route weight is applied before the wire
        }
        float* out_emul = pair_emul.data() + p.out_row * D;
        if (in.wire == CombineWire::bf16) {
          for (int d = 0; d < D; ++d) out_emul[d] = formats::bf16_to_float(formats::float_to_bf16(o_emul[d]));
        } else {
          std::vector<float> wire = fp8_round_trip(o_emul, 32);
          std::copy(wire.begin(), wire.end(), out_emul);
        }
      }
    }
  };
  int n = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  LayerOutputs out;
  out.exact.assign(n_rows * D, 0.f);
  out.emulated.assign(n_rows * D, 0.f);
  for (std::size_t r = 0; r < n_rows; ++r)
    for (int d = 0; d < D; ++d) {
      double se = 0;
      float sq = 0.f;
      for (int k = 0; k < K; ++k) {
        se += pair_exact[(r * K + k) * D + d];
        sq += pair_emul[(r * K + k) * D + d];  // fp32, in k order, as the combine does
      }
      out.exact[r * D + d] = float(se);
      out.emulated[r * D + d] = formats::bf16_to_float(formats::float_to_bf16(sq));
    }
  return out;
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
