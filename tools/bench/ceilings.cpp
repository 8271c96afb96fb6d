#include "bench/ceilings.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>

#include <random>
#include <vector>

#include <fmt/format.h>

namespace megamoe::bench {

Ceiling measure_copy_bandwidth(Device& dev, std::size_t bytes) {
  DeviceBuffer a(dev, bytes), b(dev, bytes);
  dev.fill_bytes(a.get(), 0x5A, bytes);
  StreamHandle s = dev.create_stream();
  RunTimes t = burst_and_sustained_ms(dev, s, 1.0, [&] { dev.copy_device_async(b.get(), a.get(), bytes, s); });
  dev.destroy_stream(s);
  auto tbps = [&](float ms) { return 2.0 * double(bytes) / (ms * 1e-3) / 1e12; };
  return {tbps(t.sustained_ms), tbps(t.burst_ms), true, fmt::format("device-to-device copies of {} MiB", bytes >> 20)};
}

namespace {

#define MEGAMOE_LT_FUNCTIONS(X)                                                                       \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)       \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)      \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                                \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct Lt {
#define X(name) decltype(&::name) name = nullptr;
  MEGAMOE_LT_FUNCTIONS(X)
#undef X
};

}  // namespace

Ceiling measure_fp8_rate(Device& dev, int n) {
  if (dev.kind() != BackendKind::cuda) return {0, 0, false, "not measured: cuBLASLt is NVIDIA-only"};
  void* lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return {0, 0, false, fmt::format("not measured: libcublasLt could not be loaded ({})", dlerror())};
  Lt lt;
#define X(name)                                                                   \
  lt.name = reinterpret_cast<decltype(lt.name)>(dlsym(lib, #name));               \
  if (!lt.name) return {0, 0, false, "not measured: libcublasLt lacks " #name};
  MEGAMOE_LT_FUNCTIONS(X)
#undef X

  const std::size_t nn = std::size_t(n) * n;
  std::vector<std::uint8_t> host(nn);
  std::mt19937_64 rng(7);
  for (auto& b : host) b = std::uint8_t(rng()) & 0xBF;  // e4m3 without NaN (exponent below 15)
  DeviceBuffer a(dev, nn), b(dev, nn), d(dev, nn * 2), workspace(dev, 64 << 20);
  dev.copy_to_device(a.get(), host.data(), nn);
  for (auto& v : host) v = std::uint8_t(rng()) & 0xBF;
  dev.copy_to_device(b.get(), host.data(), nn);

  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto fail = [&](const char* what, cublasStatus_t st) {
    return Ceiling{0, 0, false, fmt::format("not measured: {} returned cuBLAS status {}", what, int(st))};
  };
  cublasStatus_t st;
  if ((st = lt.cublasLtCreate(&handle))) return fail("cublasLtCreate", st);
  Ceiling result;
  do {
    if ((st = lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F))) { result = fail("MatmulDescCreate", st); break; }
    cublasOperation_t t = CUBLAS_OP_T, nop = CUBLAS_OP_N;  // fp8 wants A transposed (both K-major)
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop);
    if ((st = lt.cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n)) ||
        (st = lt.cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n)) ||
        (st = lt.cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n))) { result = fail("MatrixLayoutCreate", st); break; }
    if ((st = lt.cublasLtMatmulPreferenceCreate(&pref))) { result = fail("MatmulPreferenceCreate", st); break; }
    std::size_t ws = workspace.bytes();
    lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    st = lt.cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
    if (st || found == 0) { result = fail("MatmulAlgoGetHeuristic (or no algorithm)", st); break; }
    StreamHandle s = dev.create_stream();
    float alpha = 1.f, beta = 0.f;
    cublasStatus_t run_status = CUBLAS_STATUS_SUCCESS;
    RunTimes times = burst_and_sustained_ms(dev, s, 1.0, [&] {
      cublasStatus_t r = lt.cublasLtMatmul(handle, desc, &alpha, a.get(), la, b.get(), lb, &beta, d.get(), ld, d.get(),
                                           ld, &heuristic.algo, workspace.get(), ws, static_cast<cudaStream_t>(s));
      if (r) run_status = r;
    });
    dev.destroy_stream(s);
    if (run_status) { result = fail("cublasLtMatmul", run_status); break; }
    auto tflops = [&](float ms) { return 2.0 * double(n) * n * n / (ms * 1e-3) / 1e12; };
    result = {tflops(times.sustained_ms), tflops(times.burst_ms), true,
              fmt::format("cuBLASLt e4m3 x e4m3 -> bf16, {0}x{0}x{0}, random data", n)};
  } while (false);
  if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
  if (la) lt.cublasLtMatrixLayoutDestroy(la);
  if (lb) lt.cublasLtMatrixLayoutDestroy(lb);
  if (ld) lt.cublasLtMatrixLayoutDestroy(ld);
  if (desc) lt.cublasLtMatmulDescDestroy(desc);
  lt.cublasLtDestroy(handle);
  return result;
}

Ceilings measure_and_print_ceilings(Device& dev) {
  Ceilings c;
  c.copy = measure_copy_bandwidth(dev, std::size_t(2) << 30);
  c.fp8 = measure_fp8_rate(dev, 8192);
  // The floor uses the sustained ceilings: the layer's totals are bursts of back-to-back calls.
  fmt::print("copy bandwidth: {:.2f} TB/s sustained, {:.2f} in a short burst ({})\n", c.copy.value, c.copy.burst,
             c.copy.how);
  constexpr double kSpecFp8 = 1300.0;  // TFLOP/s, docs/contract.md's cuBLAS figure, used only when not measured
  if (c.fp8.measured)
    fmt::print("fp8 dense rate: {:.0f} TFLOP/s sustained, {:.0f} in a short burst ({})\n", c.fp8.value, c.fp8.burst,
               c.fp8.how);
  else
    fmt::print("fp8 dense rate: {:.0f} TFLOP/s ({}; the floor uses docs/contract.md's figure)\n", kSpecFp8, c.fp8.how);
  c.tbps = c.copy.value, c.tflops = c.fp8.measured ? c.fp8.value : kSpecFp8;
  return c;
}

Floor layer_floor(const ModelShape& m, long long experts_touched, long long routed_pairs, double tbps, double tflops) {
  const double values_per_expert = 3.0 * double(m.inter_dim) * m.model_dim;  // W1 (2I x D) + W2 (D x I)
  const double bytes_per_expert = values_per_expert * 4.25 / 8;              // MXFP4 with its scales
  Floor f;
  f.bytes_ms = bytes_per_expert * double(experts_touched) / (tbps * 1e12) * 1e3;
  f.flops_ms = 2.0 * values_per_expert * double(routed_pairs) / (tflops * 1e12) * 1e3;
  f.ms = std::max(f.bytes_ms, f.flops_ms);
  return f;
}

}  // namespace megamoe::bench
