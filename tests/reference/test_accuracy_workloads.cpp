// The accuracy policy's workloads on the CPU model of each path's arithmetic: the emulating
// reference (the path's quantizers, scale blocks and the fp8 MMA's sums) against the exact one,
// at Kimi-K3's shape, must stay within the policy's relL2 bar on N(0, 1), outlier and massive
// inputs. The kernels are held to the emulating reference by the GPU tests and megamoe-run.
#include <catch2/catch.hpp>

#include <numeric>

#include <fmt/format.h>

#include "codegen/kernel_paths.hpp"
#include "common/workload.hpp"
#include "megamoe/config.hpp"
#include "reference/moe_reference.hpp"

using namespace megamoe;

TEST_CASE("each path's arithmetic meets relL2 0.06 on normal, outlier and massive inputs (Kimi-K3, CPU model)",
          "[reference][accuracy]") {
  Config cfg = load_config("kimi_k3_a8w4");
  cfg.model.experts_per_rank = 16;  // every token meets every expert: the shape's GEMMs, fewer weights to dequantize
  const Mxfp4ExpertWeights w = workload::random_weights(cfg.model, 21);
  const std::int64_t T = 16;
  for (KernelPath path : {KernelPath::hopper, KernelPath::portable}) {
    const PathArithmetic arith = path_arithmetic(path, cfg.model);
    for (const std::string& kind : workload::input_kinds()) {
      std::mt19937_64 rng = workload::inputs_rng(5, T);
      const workload::Inputs in = workload::random_inputs(workload::parse_input_kind(kind), T, cfg.model.model_dim, rng);
      const workload::Routing r = workload::make_routing("uniform", T, cfg.model.topk, cfg.model.experts_per_rank, rng);
      reference::LayerInputs li;
      li.weights = &w, li.activation = cfg.activation, li.wire = cfg.bucket_for_tokens(T).combine_wire;
      li.x_block = arith.x, li.h_block = arith.h, li.accumulation = arith.accumulation, li.topk = cfg.model.topk;
      li.x = in.x.data(), li.ids = r.ids.data(), li.route_weights = r.weights.data();
      std::vector<std::int64_t> all(T);
      std::iota(all.begin(), all.end(), 0);
      const reference::LayerOutputs ref = reference::reference_layer(li, all);
      const std::size_t D = cfg.model.model_dim;
      const double call = reference::rel_l2(ref.emulated.data(), ref.exact.data(), ref.exact.size());
      fmt::print("{} arithmetic (x per {}, h per {}), {} inputs: relL2 {:.3e}", to_string(path), arith.x, arith.h, kind,
                 call);
      for (std::int64_t t : in.massive_tokens)
        fmt::print(", massive token {}: {:.3e}", t,
                   reference::rel_l2(ref.emulated.data() + t * D, ref.exact.data() + t * D, D));
      fmt::print("\n");
      INFO(to_string(path) << " arithmetic, " << kind << " inputs");
      CHECK(call <= workload::kExactBar);
      CHECK(call > 1e-3);  // the quantizers are in the model: the two references differ
    }
  }
}
