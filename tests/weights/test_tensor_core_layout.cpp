// Weight layout v3 (tensor-core and Hopper kernels): the byte-permute conversion against the e2m1 table,
// and a full round trip against the MXFP4 dequantization.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "formats/formats.hpp"
#include "megamoe/weights.hpp"
#include "weights/tensor_core_layout.hpp"

using namespace megamoe;

TEST_CASE("v3 words decode to e2m1 x 2^f for every code and every folded exponent", "[weights][v3]") {
  // The word for lane t puts value i's magnitude in nibble i and its sign at a fixed bit.
  const int sign_bit[8] = {7, 15, 23, 31, 3, 11, 19, 27};
  for (int f = -5; f <= 6; ++f)
    for (int code = 0; code < 16; ++code)
      for (int i = 0; i < 8; ++i) {
        std::uint32_t w = std::uint32_t(code & 7) << (4 * i) | std::uint32_t(code >> 3) << sign_bit[i];
        float out[8];
        decode_tensor_core_word(w, f, out);
        INFO("f " << f << " code " << code << " slot " << i);
        CHECK(out[i] == formats::e2m1_to_float(std::uint8_t(code)) * std::ldexp(1.f, f));
        for (int j = 0; j < 8; ++j)
          if (j != i) CHECK(out[j] == 0.f);
      }
}

TEST_CASE("v3 units: a block's words then its exponents, per group of 8 slabs and chunk", "[weights][v3]") {
  // 16 slabs (two full groups), 2 chunks: units of 8 x 1024 + 8 x 64 = 8704 bytes, group-major.
  CHECK(tensor_core_words_at(0, 0, 16, 2) == 0);
  CHECK(tensor_core_words_at(3, 0, 16, 2) == 3 * 1024);
  CHECK(tensor_core_exps_at(3, 0, 16, 2) == 8192 + 3 * 64);
  CHECK(tensor_core_words_at(0, 1, 16, 2) == 8704);
  CHECK(tensor_core_words_at(8, 0, 16, 2) == 2 * 8704);
  CHECK(tensor_core_exps_at(9, 1, 16, 2) == 3 * 8704 + 8192 + 64);
  CHECK(tensor_core_expert_bytes(256, 256) == 4 * 8704);
  // 12 slabs: the second group has 4, its units 4 x 1088 bytes, the exponents after its 4 KB.
  CHECK(tensor_core_words_at(8, 0, 12, 2) == 2 * 8704);
  CHECK(tensor_core_words_at(9, 1, 12, 2) == 2 * 8704 + 4 * 1088 + 1024);
  CHECK(tensor_core_exps_at(9, 1, 12, 2) == 2 * 8704 + 4 * 1088 + 4 * 1024 + 64);
  CHECK(tensor_core_expert_bytes(192, 256) == 2 * 8704 + 2 * 4 * 1088);
}

namespace {
// Rebuilds [rows][k] (checkpoint row order) from the layout.
std::vector<float> decode_all(const TensorCoreWeights& v3, int rows, int k, bool interleave) {
  const int slabs = rows / 16, chunks = k / 128;
  std::vector<float> out(std::size_t(rows) * k);
  for (int r = 0; r < rows; ++r) {
    const int slab = r / 16, in = r % 16, g = in % 8, half = in / 8;
    const int src = tensor_core_source_row(r, rows, interleave);
    for (int b = 0; b < k / 32; ++b) {
      const int c = b / 4, kb = b % 4;
      const int f = std::int8_t(v3.units[tensor_core_exps_at(slab, c, slabs, chunks) + in * 4 + kb]);
      for (int t = 0; t < 4; ++t) {
        const std::size_t at = tensor_core_words_at(slab, c, slabs, chunks) + (((g * 4 + t) * 2 + half) * 4 + kb) * 4;
        std::uint32_t w;
        std::memcpy(&w, v3.units.data() + at, 4);
        float v[8];
        decode_tensor_core_word(w, f, v);
        for (int i = 0; i < 8; ++i) {
          const int kk = b * 32 + (i < 4 ? 4 * t + i : 16 + 4 * t + i - 4);
          out[std::size_t(src) * k + kk] = v[i] * v3.row_scale[r];
        }
      }
    }
  }
  return out;
}
}  // namespace

TEST_CASE("v3 layout round trip: same values as the MXFP4 dequantization", "[weights][v3]") {
  const int rows = 64, k = 256;
  std::mt19937 rng(3);
  std::vector<std::uint8_t> packed(rows * k / 2), scales(rows * k / 32);
  for (auto& b : packed) b = std::uint8_t(rng());
  for (auto& s : scales) s = std::uint8_t(120 + rng() % 10);  // a spread of 10 binades: nothing flushed
  std::vector<float> want(rows * k);
  formats::dequantize_mxfp4(packed.data(), scales.data(), want.size(), want.data());
  for (bool interleave : {false, true}) {
    TensorCoreWeights v3 = to_tensor_core_layout(packed.data(), scales.data(), 1, rows, k, interleave);
    CHECK(v3.units.size() == tensor_core_expert_bytes(rows, k));
    CHECK(v3.flushed_blocks == 0);
    CHECK(decode_all(v3, rows, k, interleave) == want);
  }
}

TEST_CASE("v3 layout of several experts (converted in parallel) matches each expert's own", "[weights][v3]") {
  const int experts = 7, rows = 32, k = 128;
  std::mt19937 rng(5);
  std::vector<std::uint8_t> packed(std::size_t(experts) * rows * k / 2), scales(std::size_t(experts) * rows * k / 32);
  for (auto& b : packed) b = std::uint8_t(rng());
  for (auto& s : scales) s = std::uint8_t(118 + rng() % 12);
  TensorCoreWeights all = to_tensor_core_layout(packed.data(), scales.data(), experts, rows, k, true);
  const std::size_t words = std::size_t(rows) * k / 2, exps = std::size_t(rows) * k / 32;
  const std::size_t bytes = tensor_core_expert_bytes(rows, k);
  REQUIRE(all.units.size() == experts * bytes);
  for (int e = 0; e < experts; ++e) {
    TensorCoreWeights one = to_tensor_core_layout(packed.data() + e * words, scales.data() + e * exps, 1, rows, k, true);
    INFO("expert " << e);
    CHECK(std::equal(one.units.begin(), one.units.end(), all.units.begin() + e * bytes));
    CHECK(std::equal(one.row_scale.begin(), one.row_scale.end(), all.row_scale.begin() + e * rows));
  }
}

TEST_CASE("v3 layout flushes blocks more than 11 binades below their row's largest", "[weights][v3]") {
  const int rows = 16, k = 128;
  std::vector<std::uint8_t> packed(rows * k / 2, 0x22), scales(rows * k / 32, 127);  // every value 1.0
  scales[0] = 127 - 12;  // row 0, block 0: 12 binades below the row's others
  scales[1] = 127 - 11;  // row 0, block 1: 11 below, still folded
  TensorCoreWeights v3 = to_tensor_core_layout(packed.data(), scales.data(), 1, rows, k, false);
  CHECK(v3.flushed_blocks == 1);
  std::vector<float> got = decode_all(v3, rows, k, false);
  CHECK(got[0] == 0.f);
  CHECK(got[32] == std::ldexp(1.f, -11));
  CHECK(got[64] == 1.f);
}
