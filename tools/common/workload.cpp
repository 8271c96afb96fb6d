#include "common/workload.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/formats.hpp"
#include "megamoe/errors.hpp"
#include "reference/moe_reference.hpp"

namespace megamoe::workload {

namespace {

// The weights' generator: xorshift64 bytes for the e2m1 codes, then e8m0 scales from a
// mt19937_64. Both random_weights and random_group_weights draw through these, each with its
// own streams (the tools and tests rely on the values of each staying as they are).

// n bytes from the xorshift64 state s; returns the state after them.
std::uint64_t xorshift_bytes(std::uint8_t* p, std::size_t n, std::uint64_t s) {
  for (std::size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = std::uint8_t(s >> 24);
  }
  return s;
}

// e8m0 scales 2^(base + {0, 1}) with base chosen so that a dot product of length k with
// random e2m1 codes (rms about 2.93) and inputs of rms 1 has an rms of about 1.5.
void scale_bytes(std::uint8_t* p, std::size_t n, int k, std::mt19937_64& rng) {
  const int base = int(std::lround(std::log2(1.5 / (std::sqrt(double(k)) * 2.93)))) - 1;
  for (std::size_t i = 0; i < n; ++i) p[i] = std::uint8_t(127 + base + int(rng() % 2));
}

// job(0) .. job(jobs - 1) on the cores there are; what each job draws depends on its index alone.
template <class Job>
void run_jobs(unsigned jobs, const Job& job) {
  std::atomic<unsigned> next{0};
  auto worker = [&] {
    for (unsigned j; (j = next++) < jobs;) job(j);
  };
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < std::min(jobs, std::max(1u, std::thread::hardware_concurrency())); ++i)
    pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

// Bytes from kStreams independent xorshift streams over consecutive chunks, so that they depend
// on the seed alone (not on the machine's cores) and fill on every core (Kimi-K3 has about 2 GB).
void fill_random(std::vector<std::uint8_t>& v, std::uint64_t seed) {
  constexpr unsigned kStreams = 16;
  const std::size_t chunk = (v.size() / kStreams + 7) & ~std::size_t(7);
  run_jobs(kStreams, [&](unsigned t) {
    const std::size_t from = std::min(v.size(), t * chunk), to = std::min(v.size(), (t + 1) * chunk);
    xorshift_bytes(v.data() + from, to - from, seed * 0x9E3779B97F4A7C15ull + t + 1);
  });
}

void fill_scales(std::vector<std::uint8_t>& v, int k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  scale_bytes(v.data(), v.size(), k, rng);
}

// Expert e's biases where the model has them (model.expert_biases): N(0, 0.5^2), about a third
// of a GEMM output's rms (scale_bytes), so that a bias lost or misplaced shows against the bars.
// b1 and b2 must be sized for every expert first.
void draw_biases(Mxfp4ExpertWeights& w, int e, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0.f, 0.5f);
  const std::size_t b1 = std::size_t(2) * w.inter_dim, b2 = w.model_dim;
  for (std::size_t i = 0; i < b1; ++i) w.b1[e * b1 + i] = n(rng);
  for (std::size_t i = 0; i < b2; ++i) w.b2[e * b2 + i] = n(rng);
}

void size_biases(Mxfp4ExpertWeights& w) {
  w.b1.resize(std::size_t(w.experts) * 2 * w.inter_dim);
  w.b2.resize(std::size_t(w.experts) * w.model_dim);
}

float softmax_weights(std::vector<float>& w, std::size_t at, int k, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0.f, 1.f);
  float sum = 0;
  for (int i = 0; i < k; ++i) sum += (w[at + i] = std::exp(n(rng)));
  for (int i = 0; i < k; ++i) w[at + i] /= sum;
  return sum;
}

void distinct_experts(int* out, int k, int pool, std::mt19937_64& rng) {
  std::vector<int> all(pool);
  std::iota(all.begin(), all.end(), 0);
  for (int i = 0; i < k; ++i) {
    std::size_t j = i + rng() % (pool - i);
    std::swap(all[i], all[j]);
    out[i] = all[i];
  }
}

}  // namespace

Mxfp4ExpertWeights random_weights(const ModelShape& m, std::uint64_t seed) {
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(m.experts_per_rank, m.model_dim, m.inter_dim);
  fill_random(w.w1_packed, seed);
  fill_random(w.w2_packed, seed + 1);
  fill_scales(w.w1_scales, m.model_dim, seed + 2);
  fill_scales(w.w2_scales, m.inter_dim, seed + 3);
  if (m.expert_biases) {
    size_biases(w);
    std::mt19937_64 rng(seed + 4);
    for (int e = 0; e < w.experts; ++e) draw_biases(w, e, rng);
  }
  return w;
}

Mxfp4ExpertWeights random_shared_weights(const ModelShape& m, std::uint64_t seed) {
  ModelShape shared = m;
  shared.experts = shared.experts_per_rank = shared.logical_experts = m.shared_experts;
  return random_group_weights(shared, 1, seed ^ 0x5348415245440000ull);  // "SHARED": streams apart from the routed ones'
}

Mxfp4ExpertWeights with_shared_weights(Mxfp4ExpertWeights routed, const ModelShape& m, std::uint64_t seed) {
  return m.shared_experts ? append_experts(routed, random_shared_weights(m, seed)) : routed;
}

Mxfp4ExpertWeights random_group_weights(const ModelShape& m, int world, std::uint64_t seed) {
  const int experts = world * m.experts_per_rank;
  Mxfp4ExpertWeights w = Mxfp4ExpertWeights::zeros(experts, m.model_dim, m.inter_dim);
  const std::size_t p1 = w.w1_packed.size() / experts, p2 = w.w2_packed.size() / experts;
  const std::size_t s1 = w.w1_scales.size() / experts, s2 = w.w2_scales.size() / experts;
  if (m.expert_biases) size_biases(w);
  // One stream per expert: its codes, then its scales (and biases) from a generator seeded where
  // they end.
  run_jobs(unsigned(experts), [&](unsigned e) {
    std::uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(e) + 1) * 0xD1B54A32D192ED03ull;
    s = xorshift_bytes(w.w1_packed.data() + e * p1, p1, s);
    s = xorshift_bytes(w.w2_packed.data() + e * p2, p2, s);
    std::mt19937_64 rng(s);
    scale_bytes(w.w1_scales.data() + e * s1, s1, m.model_dim, rng);
    scale_bytes(w.w2_scales.data() + e * s2, s2, m.inter_dim, rng);
    if (m.expert_biases) draw_biases(w, int(e), rng);
  });
  return w;
}

Mxfp4ExpertWeights slice_experts(const Mxfp4ExpertWeights& w, int first, int count) {
  std::vector<int> experts(count);
  std::iota(experts.begin(), experts.end(), first);
  return gather_experts(w, experts);
}

std::mt19937_64 inputs_rng(std::uint64_t seed, std::int64_t tokens, int draw) {
  std::seed_seq seq{std::uint32_t(seed), std::uint32_t(seed >> 32), std::uint32_t(tokens), std::uint32_t(tokens >> 32),
                    std::uint32_t(draw)};
  return std::mt19937_64(seq);
}

std::vector<std::uint16_t> random_bf16(std::int64_t tokens, int dim, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<std::uint16_t> v(std::size_t(tokens) * dim);
  for (auto& x : v) x = formats::float_to_bf16(n(rng));
  return v;
}

const std::vector<std::string>& input_kinds() {  // in InputKind's order
  static const std::vector<std::string> kinds = {"normal", "outliers", "massive"};
  return kinds;
}

InputKind parse_input_kind(const std::string& name) {
  const auto& kinds = input_kinds();
  const auto it = std::find(kinds.begin(), kinds.end(), name);
  if (it == kinds.end()) throw Error(fmt::format("megamoe: inputs '{}' is not one of {}", name, fmt::join(kinds, ", ")));
  return InputKind(it - kinds.begin());
}

const char* to_string(InputKind kind) { return input_kinds().at(std::size_t(kind)).c_str(); }

int outlier_channels(int dim) { return std::max(2, dim / 1024); }

Inputs random_inputs(InputKind kind, std::int64_t tokens, int dim, std::mt19937_64& rng) {
  Inputs in;
  if (kind == InputKind::normal) {
    in.x = random_bf16(tokens, dim, rng);
    return in;
  }
  // Distinct channels: the outliers', then the massive one apart from them.
  std::vector<int> channels(dim);
  std::iota(channels.begin(), channels.end(), 0);
  std::shuffle(channels.begin(), channels.end(), rng);
  const int n_out = std::min(outlier_channels(dim), dim - 1);
  in.outlier_channels.assign(channels.begin(), channels.begin() + n_out);
  std::sort(in.outlier_channels.begin(), in.outlier_channels.end());
  std::vector<float> scale(dim, 1.f);
  for (int c : in.outlier_channels) scale[c] = kOutlierScale;
  std::student_t_distribution<float> t(4.f);
  const float unit = std::sqrt(0.5f);  // t(4) has variance 4 / (4 - 2) = 2
  std::vector<float> v(std::size_t(tokens) * dim);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t(rng) * unit * scale[i % dim];
  if (kind == InputKind::massive && tokens > 0) {
    in.massive_channel = channels[n_out];
    std::uniform_int_distribution<std::int64_t> first(0, std::min<std::int64_t>(tokens, kMassiveEvery) - 1);
    for (std::int64_t tok = first(rng); tok < tokens; tok += kMassiveEvery) in.massive_tokens.push_back(tok);
    for (std::size_t i = 0; i < in.massive_tokens.size(); ++i) {
      float& m = v[std::size_t(in.massive_tokens[i]) * dim + in.massive_channel];
      m = (m < 0 ? -1.f : 1.f) * (i % 2 ? 10000.f : 1000.f);
    }
  }
  in.x.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) in.x[i] = formats::float_to_bf16(v[i]);
  return in;
}

const std::vector<std::string>& routing_kinds() {
  static const std::vector<std::string> kinds = {"uniform", "single", "sparse", "holes", "bad", "ramp", "one_rank", "zipf"};
  return kinds;
}

namespace {

// `count` distinct experts of [0, pool) in ids[0, count), the rest of the token's topk slots empty.
void distinct_then_empty(int* ids, int count, int pool, int topk, std::mt19937_64& rng) {
  distinct_experts(ids, count, pool, rng);
  for (int k = count; k < topk; ++k) ids[k] = -1;
}

// ramp: expert e takes 2e + 1 rows, dealt to the tokens in turn (slot k of every token, then k + 1).
Routing ramp_routing(Routing r, int experts, std::mt19937_64& rng) {
  for (std::int64_t t = 0; t < r.tokens; ++t) softmax_weights(r.weights, t * r.topk, r.topk, rng);
  std::fill(r.ids.begin(), r.ids.end(), -1);
  std::int64_t i = 0;
  for (int e = 0; e < experts; ++e)
    for (int n = 0; n < 2 * e + 1 && i < r.tokens * r.topk; ++n, ++i) r.ids[(i % r.tokens) * r.topk + i / r.tokens] = e;
  return r;
}

// One token's ids as `kind` draws them (every kind but ramp).
void draw_ids(const std::string& kind, int* ids, int topk, int experts, int experts_per_rank,
              std::discrete_distribution<int>& zipf, std::mt19937_64& rng) {
  const int k_distinct = std::min(topk, experts);
  if (kind == "uniform" || kind == "holes" || kind == "bad") {
    distinct_then_empty(ids, k_distinct, experts, topk, rng);
  } else if (kind == "one_rank") {
    const int pool = experts_per_rank > 0 ? std::min(experts_per_rank, experts) : experts;
    distinct_then_empty(ids, std::min(topk, pool), pool, topk, rng);
  } else if (kind == "zipf") {
    for (int k = 0; k < k_distinct; ++k) {
      int e = zipf(rng);
      while (std::find(ids, ids + k, e) != ids + k) e = zipf(rng);
      ids[k] = e;
    }
    for (int k = k_distinct; k < topk; ++k) ids[k] = -1;
  } else if (kind == "single") {
    std::fill(ids, ids + topk, 0);
  } else if (kind == "sparse") {
    const int pool = std::min(experts, topk + 4);
    distinct_then_empty(ids, std::min(topk, pool), pool, topk, rng);
  } else {
    std::string known;
    for (auto& k : routing_kinds()) known += (known.empty() ? "" : ", ") + k;
    throw Error(fmt::format("megamoe: unknown routing '{}' (known: {})", kind, known));
  }
}

// holes: slots (or whole tokens) emptied; bad: ids out of range planted (counted in the return).
long long spoil_ids(const std::string& kind, int* ids, int topk, int experts, std::mt19937_64& rng) {
  long long planted = 0;
  if (kind == "holes") {
    bool empty_token = rng() % 16 == 0;
    for (int k = 0; k < topk; ++k)
      if (empty_token || rng() % 10 < 3) ids[k] = -1;
  }
  if (kind == "bad")
    for (int k = 0; k < topk; ++k)
      if (rng() % 50 == 0) {
        ids[k] = rng() % 2 ? experts + int(rng() % 1000) : -2 - int(rng() % 1000);
        ++planted;
      }
  return planted;
}

}  // namespace

Routing make_routing(const std::string& kind, std::int64_t tokens, int topk, int experts, std::mt19937_64& rng,
                     int experts_per_rank) {
  Routing r;
  r.tokens = tokens, r.topk = topk;
  r.ids.assign(std::size_t(tokens) * topk, 0);
  r.weights.assign(std::size_t(tokens) * topk, 0.f);
  if (kind == "ramp") return ramp_routing(std::move(r), experts, rng);
  std::discrete_distribution<int> zipf;
  if (kind == "zipf") {
    std::vector<double> p(experts);
    for (int e = 0; e < experts; ++e) p[e] = 1.0 / (e + 1);
    zipf = std::discrete_distribution<int>(p.begin(), p.end());
  }
  for (std::int64_t t = 0; t < tokens; ++t) {
    int* ids = r.ids.data() + t * topk;
    softmax_weights(r.weights, t * topk, topk, rng);
    draw_ids(kind, ids, topk, experts, experts_per_rank, zipf, rng);
    r.planted_bad_ids += spoil_ids(kind, ids, topk, experts, rng);
  }
  return r;
}

std::vector<long long> expert_load(const Routing& r, int logical) {
  std::vector<long long> load(logical, 0);
  for (int id : r.ids)
    if (id >= 0 && id < logical) ++load[id];
  return load;
}

std::vector<int> eplb_placement(int logical, int physical, const std::vector<long long>& load, std::mt19937_64& rng) {
  if (physical < logical || int(load.size()) != logical)
    throw Error(fmt::format("megamoe: eplb_placement: {} slots for {} experts with {} loads, expected at least one slot "
                            "and one load per expert",
                            physical, logical, load.size()));
  std::vector<int> slots(logical), replicas(logical, 1);
  std::iota(slots.begin(), slots.end(), 0);
  while (int(slots.size()) < physical) {
    int hottest = 0;
    for (int e = 1; e < logical; ++e)  // load per replica: a x b' > b x a' compares a / a' with b / b'
      if (load[e] * replicas[hottest] > load[hottest] * replicas[e]) hottest = e;
    slots.push_back(hottest);
    ++replicas[hottest];
  }
  std::shuffle(slots.begin(), slots.end(), rng);
  return slots;
}

Routing to_physical(const Routing& logical, const std::vector<int>& physical_to_logical, int logical_experts,
                    std::mt19937_64& rng) {
  std::vector<std::vector<int>> replicas(logical_experts);
  for (std::size_t s = 0; s < physical_to_logical.size(); ++s) replicas.at(physical_to_logical[s]).push_back(int(s));
  const int extra = int(physical_to_logical.size()) - logical_experts;
  Routing r = logical;
  for (int& id : r.ids) {
    if (id < 0) continue;
    if (id >= logical_experts) id += extra;  // a bad id stays past the slots
    else id = replicas[id][rng() % replicas[id].size()];
  }
  return r;
}

Routing read_routing(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("megamoe: cannot read routing file {}", path));
  std::string magic, tok, tk;
  int version = 0;
  Routing r;
  if (!(in >> magic >> version) || magic != "megamoe-routing" || version != 1)
    throw Error(fmt::format("megamoe: routing file {}: expected the header 'megamoe-routing 1'", path));
  if (!(in >> tok >> r.tokens >> tk >> r.topk) || tok != "tokens" || tk != "topk" || r.tokens < 0 || r.topk < 1)
    throw Error(fmt::format("megamoe: routing file {}: expected 'tokens T topk K' on line 2", path));
  r.ids.resize(std::size_t(r.tokens) * r.topk);
  r.weights.resize(r.ids.size());
  for (std::int64_t t = 0; t < r.tokens; ++t) {
    for (int k = 0; k < r.topk; ++k)
      if (!(in >> r.ids[t * r.topk + k])) throw Error(fmt::format("megamoe: routing file {}: token {}: ids end early", path, t));
    for (int k = 0; k < r.topk; ++k)
      if (!(in >> r.weights[t * r.topk + k]))
        throw Error(fmt::format("megamoe: routing file {}: token {}: weights end early", path, t));
  }
  return r;
}

void write_routing(const Routing& r, const std::string& path) {
  std::ofstream out(path);
  out << "megamoe-routing 1\ntokens " << r.tokens << " topk " << r.topk << "\n";
  for (std::int64_t t = 0; t < r.tokens; ++t) {
    for (int k = 0; k < r.topk; ++k) out << r.ids[t * r.topk + k] << ' ';
    for (int k = 0; k < r.topk; ++k) out << fmt::format("{:.9g}", r.weights[t * r.topk + k]) << (k + 1 < r.topk ? " " : "\n");
  }
  if (!out) throw Error(fmt::format("megamoe: cannot write routing file {}", path));
}

EmulatedBars emulated_bars(CombineWire wire) {
  // Measured on the H200 over every path (docs/journal/2026-12.md, 2026-12-01): bf16 wire up to
  // 4.1e-4 over a call and 2.5e-3 for one token; fp8 wire up to 1.25e-3 and 8.6e-3.
  return wire == CombineWire::bf16 ? EmulatedBars{1e-3, 5e-3} : EmulatedBars{2.5e-3, 2e-2};
}

std::vector<CheckResult> check_group(const Config& config, const Mxfp4ExpertWeights& w, int experts,
                                     const std::vector<RankOutput>& ranks, std::size_t max_tokens,
                                     std::mt19937_64& rng, PathArithmetic arithmetic, const Mxfp4ExpertWeights* shared) {
  const int D = config.model.model_dim, K = config.model.topk;
  // Every rank's checked tokens in one call of the references: each expert's weights are
  // dequantized once for all of them.
  std::vector<CheckResult> out(ranks.size());
  std::vector<std::vector<std::int64_t>> tokens(ranks.size());
  std::vector<std::uint16_t> x;
  std::vector<int> ids;
  std::vector<float> weights;
  std::vector<int> home_nodes, slot_nodes;
  bool over_nodes = false;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Routing& routing = *ranks[r].routing;
    tokens[r].resize(routing.tokens);
    std::iota(tokens[r].begin(), tokens[r].end(), 0);
    if (tokens[r].size() > max_tokens) {
      std::shuffle(tokens[r].begin(), tokens[r].end(), rng);
      tokens[r].resize(max_tokens);
      std::sort(tokens[r].begin(), tokens[r].end());
      out[r].subset = true;
    }
    if (ranks[r].massive) {  // always checked, even past max_tokens
      tokens[r].insert(tokens[r].end(), ranks[r].massive->begin(), ranks[r].massive->end());
      std::sort(tokens[r].begin(), tokens[r].end());
      tokens[r].erase(std::unique(tokens[r].begin(), tokens[r].end()), tokens[r].end());
    }
    out[r].checked_tokens = tokens[r].size();
    for (std::int64_t t : tokens[r]) {
      x.insert(x.end(), ranks[r].x->begin() + t * D, ranks[r].x->begin() + (t + 1) * D);
      ids.insert(ids.end(), routing.ids.begin() + t * K, routing.ids.begin() + (t + 1) * K);
      weights.insert(weights.end(), routing.weights.begin() + t * K, routing.weights.begin() + (t + 1) * K);
      home_nodes.push_back(ranks[r].node);
      if (ranks[r].slot_nodes)
        slot_nodes.insert(slot_nodes.end(), ranks[r].slot_nodes->begin() + t * K,
                          ranks[r].slot_nodes->begin() + (t + 1) * K), over_nodes = true;
      else
        slot_nodes.insert(slot_nodes.end(), K, -1);
    }
  }
  std::vector<std::int64_t> all(x.size() / D);
  std::iota(all.begin(), all.end(), 0);
  reference::LayerInputs in;
  in.weights = &w;
  in.activation = config.activation;
  in.wire = config.bucket_for_tokens(ranks.empty() ? 1 : ranks[0].routing->tokens).combine_wire;
  in.x_block = arithmetic.x, in.h_block = arithmetic.h, in.h_static = arithmetic.h_static;
  in.model_dim = arithmetic.model_dim, in.inter_dim = arithmetic.inter_dim;
  in.accumulation = arithmetic.accumulation;
  in.topk = K;
  in.x = x.data();
  in.ids = ids.data();
  in.route_weights = weights.data();
  in.experts = experts;
  if (over_nodes) in.slot_nodes = slot_nodes.data(), in.home_nodes = home_nodes.data();
  if (config.model.shared_experts > 0) {
    if (!shared || shared->experts != config.model.shared_experts)
      throw Error(fmt::format("megamoe: check of config {}: its {} shared experts' weights are {}", config.name,
                              config.model.shared_experts,
                              shared ? fmt::format("{} experts", shared->experts) : std::string("not given")));
    in.shared = shared, in.shared_scale = config.model.shared_expert_scale;
  }
  reference::LayerOutputs ref;
  if (!all.empty()) ref = reference::reference_layer(in, all);
  std::size_t row = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    CheckResult& c = out[r];
    c.bars = emulated_bars(in.wire);
    const std::size_t n = tokens[r].size();
    std::vector<float> got(n * D);
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < D; ++d) {
        const float v = formats::bf16_to_float((*ranks[r].y)[tokens[r][i] * D + d]);
        c.unwritten += std::isnan(v);
        got[i * D + d] = v;
      }
    if (n == 0) continue;
    const float* exact = ref.exact.data() + row * D;
    const float* emulated = ref.emulated.data() + row * D;
    const float* reach = ref.flip_reach.data() + row * D;
    auto beyond = [&](std::size_t i0, std::size_t count) {
      return reference::rel_l2_beyond(got.data() + i0, emulated + i0, reach + i0, count);
    };
    c.rel_l2_exact = reference::rel_l2(got.data(), exact, got.size());
    c.rel_l2_emulated = beyond(0, got.size());
    for (std::size_t i = 0; i < n; ++i) c.worst_token_emulated = std::max(c.worst_token_emulated, beyond(i * D, D));
    c.h_near_boundary = ref.h_near_boundary;
    if (ranks[r].massive)
      for (std::int64_t t : *ranks[r].massive) {
        const std::size_t i = std::lower_bound(tokens[r].begin(), tokens[r].end(), t) - tokens[r].begin();
        c.massive.push_back({t, reference::rel_l2(got.data() + i * D, exact + i * D, D), beyond(i * D, D)});
      }
    row += n;
  }
  return out;
}

CheckResult check_layer(const Config& config, const Mxfp4ExpertWeights& w, const std::vector<std::uint16_t>& x,
                        const Routing& r, const std::vector<std::uint16_t>& y, std::size_t max_tokens,
                        std::mt19937_64& rng, PathArithmetic arithmetic, const std::vector<std::int64_t>* massive,
                        const Mxfp4ExpertWeights* shared) {
  return check_group(config, w, w.experts, {RankOutput{&x, &r, &y, massive}}, max_tokens, rng, arithmetic, shared)[0];
}

Config load_for_world(const std::string& name_or_path, int world, int experts_per_rank) {
  Config c = load_config(name_or_path);
  return experts_per_rank > 0 ? with_experts(std::move(c), experts_per_rank * world) : c;
}


}  // namespace megamoe::workload
