// The accuracy policy's workloads on the CPU model of each arithmetic: the emulating reference
// (the quantizers, scale blocks and the fp8 MMA's sums) against the exact one, at Kimi-K3's
// shape, within the policy's relL2 bar on N(0, 1), outlier and massive inputs. The kernels are
// held to the emulating reference by the GPU tests and megamoe-run.
#include <catch2/catch.hpp>

#include <numeric>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "common/workload.hpp"
#include "megamoe/config.hpp"
#include "reference/moe_reference.hpp"

using namespace megamoe;

namespace {

struct Arithmetic {
  std::string name;
  PathArithmetic arith;
};

// relL2 of the emulating reference against the exact one over T tokens of each workload, and over
// each massive token alone; printed as a table row.
void check_workloads(const Config& cfg, const Mxfp4ExpertWeights& w, const Arithmetic& a, std::int64_t T) {
  for (const std::string& kind : workload::input_kinds()) {
    std::mt19937_64 rng = workload::inputs_rng(5, T);
    const workload::Inputs in = workload::random_inputs(workload::parse_input_kind(kind), T, cfg.model.model_dim, rng);
    const workload::Routing r = workload::make_routing("uniform", T, cfg.model.topk, cfg.model.experts_per_rank, rng);
    reference::LayerInputs li;
    li.weights = &w, li.activation = cfg.activation, li.wire = cfg.bucket_for_tokens(T).combine_wire;
    li.x_block = a.arith.x, li.h_block = a.arith.h, li.h_static = a.arith.h_static;
    li.accumulation = a.arith.accumulation, li.topk = cfg.model.topk;
    li.x = in.x.data(), li.ids = r.ids.data(), li.route_weights = r.weights.data();
    std::vector<std::int64_t> all(T);
    std::iota(all.begin(), all.end(), 0);
    const reference::LayerOutputs ref = reference::reference_layer(li, all);
    const std::size_t D = cfg.model.model_dim;
    const double call = reference::rel_l2(ref.emulated.data(), ref.exact.data(), ref.exact.size());
    fmt::print("{}, {} inputs: relL2 {:.3e}", a.name, kind, call);
    for (std::int64_t t : in.massive_tokens)
      fmt::print(", massive token {}: {:.3e}", t,
                 reference::rel_l2(ref.emulated.data() + t * D, ref.exact.data() + t * D, D));
    fmt::print("\n");
    INFO(a.name << ", " << kind << " inputs");
    CHECK(call <= workload::kExactBar);
    CHECK(call > 1e-3);  // the quantizers are in the model: the two references differ
  }
}

}  // namespace

TEST_CASE("each path's arithmetic meets relL2 0.06 on normal, outlier and massive inputs (Kimi-K3, CPU model)",
          "[reference][accuracy]") {
  const Config cfg = with_experts(load_config("kimi_k3_a8w4"), 16);  // every token meets every expert: the shape's GEMMs, fewer weights to dequantize
  const Mxfp4ExpertWeights w = workload::random_weights(cfg.model, 21);
  for (KernelPath path : {KernelPath::hopper, KernelPath::portable}) {
    BucketConfig b = cfg.bucket(16);
    b.x_scale = XScale::per_block, b.h_scale = HScale::per_block;
    const PathArithmetic a = path_arithmetic(path, cfg, b);
    check_workloads(cfg, w, {fmt::format("{} (x per {}, h per {})", to_string(path), a.x, a.h), a}, 16);
  }
}

TEST_CASE("promotion-free forms on the fp8 MMA: x per row, h in a static scale (Kimi-K3, CPU model)",
          "[reference][accuracy]") {
  const Config cfg = with_experts(load_config("kimi_k3_a8w4"), 16);
  const Mxfp4ExpertWeights w = workload::random_weights(cfg.model, 21);
  for (XScale x : {XScale::per_block, XScale::per_row})
    for (HScale h : {HScale::per_block, HScale::static_bound}) {
      if (x == XScale::per_block && h == HScale::per_block) continue;  // the test above
      BucketConfig b = cfg.bucket(16);
      b.x_scale = x, b.h_scale = h;
      const PathArithmetic a = path_arithmetic(KernelPath::hopper, cfg, b);
      CHECK(a.x == (x == XScale::per_row ? cfg.model.model_dim : 256));
      CHECK(a.h_static == (h == HScale::static_bound));
      check_workloads(cfg, w, {fmt::format("hopper, x {}, h {}", to_string(x), to_string(h)), a}, 16);
    }
}
