// The device's fp8 packing (templates/common/numerics.cuh): mm_f32x4_to_e4m3, one cvt.satfinite
// per pair on sm_89 and later, gives the host encoder's bytes (src/formats) for every kind of
// float: zeros, float and e4m3 subnormals, every tie between two e4m3 values and the floats
// beside it, the saturation edge, infinities, NaN of both signs, and random values of both signs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "codegen/kernel_spec.hpp"
#include "formats/formats.hpp"
#include "jit/kernel_builder.hpp"
#include "megamoe/megamoe.hpp"

using namespace megamoe;

namespace {

std::vector<float> probe_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.f, -0.f, inf, -inf, nan, -nan, 1e-40f, -1e-40f, 448.f, -448.f, 464.f, 480.f, 1e30f};
  for (int c = 0; c < 0x7E; ++c) {  // every positive e4m3 code and the tie above it
    const float lo = formats::e4m3_to_float(std::uint8_t(c)), hi = formats::e4m3_to_float(std::uint8_t(c + 1));
    const float mid = (lo + hi) / 2;  // exact: both are short binary fractions
    for (float x : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, inf)}) v.push_back(x), v.push_back(-x);
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-14, 10);
  while (v.size() % 4 || v.size() < 8192) v.push_back((rng() & 1 ? -1.f : 1.f) * std::ldexp(mant(rng), exp(rng)));
  return v;
}

}  // namespace

TEST_CASE("the device's fp8 packing gives the host encoder's bytes", "[gpu][numerics]") {
  std::unique_ptr<Device> dev = open_device(BackendKind::cuda);
  KernelSpec s;
  s.family = "test_e4m3_pack";
  s.includes = {"common/numerics.cuh"};
  s.params = "const float* in, unsigned* out, int words";
  s.body =
      "const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i >= words) return;\n"
      "  const float v[4] = {in[4 * i], in[4 * i + 1], in[4 * i + 2], in[4 * i + 3]};\n"
      "  out[i] = megamoe::mm_f32x4_to_e4m3(v);";
  s.threads = 256;
  KernelBuilder builder(make_compiler(BackendKind::cuda), dev->arch(), {});
  BuildReport built = builder.build(s);
  std::unique_ptr<Module> module = dev->load_module(built.kernel->binary);
  void* fn = module->function(built.kernel->symbol);

  const std::vector<float> v = probe_values();
  int words = int(v.size() / 4);
  DeviceBuffer in(*dev, v.size() * 4), out(*dev, v.size());
  dev->copy_to_device(in.get(), v.data(), v.size() * 4);
  dev->fill_bytes(out.get(), 0xAB, out.bytes());
  void* ip = in.get();
  void* op = out.get();
  void* args[] = {&ip, &op, &words};
  dev->launch(fn, Dim3{unsigned((words + 255) / 256), 1, 1}, Dim3{256, 1, 1}, 0, nullptr, args);
  dev->synchronize(nullptr);
  std::vector<std::uint8_t> got(v.size());
  dev->copy_to_host(got.data(), out.get(), got.size());

  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint8_t want = formats::float_to_e4m3(v[i]);
    if (got[i] != want && ++wrong <= 10) {
      std::uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      UNSCOPED_INFO("value " << v[i] << " (0x" << std::hex << bits << "): device 0x" << int(got[i]) << ", host 0x"
                             << int(want) << std::dec);
    }
  }
  CHECK(wrong == 0);
}
