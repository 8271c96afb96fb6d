// The bench's floor (tools/bench/ceilings.cpp) against docs/contract.md's own figures for the
// Kimi-K3 per-rank shape: 17.5 MB of MXFP4 per expert, 66.1 MFLOP per routed pair, and at
// 4.08 TB/s and 1.30 PFLOP/s about 0.06 ms at bs 1 (16 experts) and 6.66 ms at bs 8192.
#include <catch2/catch.hpp>

#include "bench/ceilings.hpp"
#include "megamoe/config.hpp"

using namespace megamoe;

TEST_CASE("the bench's floor gives docs/contract.md's Kimi-K3 figures", "[cli][bench]") {
  const ModelShape m = load_config("kimi_k3_a8w4").model;
  // bs 1: 16 experts touched, 16 routed pairs: bound by the weight bytes.
  const bench::Floor one = bench::layer_floor(m, 16, 16, 4.08, 1300.0);
  CHECK(one.bytes_ms == Approx(16 * 17.55e6 / 4.08e12 * 1e3).epsilon(0.01));  // 0.0688 ms
  CHECK(one.ms == one.bytes_ms);
  CHECK(one.flops_ms == Approx(16 * 66.06e6 / 1.30e15 * 1e3).epsilon(0.01));
  // bs 8192: every expert, 131072 pairs: bound by the FLOPs, 6.66 ms.
  const bench::Floor big = bench::layer_floor(m, 112, 8192LL * 16, 4.08, 1300.0);
  CHECK(big.ms == big.flops_ms);
  CHECK(big.ms == Approx(6.66).epsilon(0.01));
  CHECK(big.bytes_ms == Approx(112 * 17.55e6 / 4.08e12 * 1e3).epsilon(0.01));  // 0.48 ms, docs/contract.md's floor at bs 32 to 512
}
