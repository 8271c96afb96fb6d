// The fp8-resident layout (src/weights/fp8_resident_layout.hpp): where each value lies (128-row
// groups, 128-k chunks, the 128-byte swizzle), and that its bytes, times layout v3's row scales,
// are the MXFP4 values, with blocks flushed as v3 flushes them; several experts at once as each
// alone.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "formats/formats.hpp"
#include "weights/fp8_resident_layout.hpp"

using namespace megamoe;

TEST_CASE("fp8-resident addresses: groups of 128 rows, chunks of 128 k, the 128-byte swizzle", "[weights][fp8]") {
  const int k = 256;  // two chunks of 16 KB per group
  CHECK(fp8_resident_at(0, 0, k) == 0);
  CHECK(fp8_resident_at(1, 0, k) == 128 + 16);              // row 1: its first 16 bytes in unit 1
  CHECK(fp8_resident_at(9, 130, k) == 16384 + 9 * 128 + 18);  // chunk 1, b 2: unit 0 ^ 1
  CHECK(fp8_resident_at(130, 33, k) == 2 * 16384 + 2 * 128 + 1);  // group 1, row 2, b 33: unit 2 ^ 2
  CHECK(fp8_resident_at(7, 127, k) == 7 * 128 + ((7 ^ 7) << 4) + 15);
  CHECK(fp8_resident_expert_bytes(192, k) == 2 * 128 * 256);  // a short last group is padded
  CHECK(fp8_resident_expert_bytes(6144, 3584) == std::size_t(6144) * 3584);
}

TEST_CASE("fp8-resident bytes times the row scales are the MXFP4 values, flushed as v3 flushes", "[weights][fp8]") {
  const int experts = 3, rows = 192, k = 256, kblocks = k / 32;
  std::mt19937 rng(11);
  std::vector<std::uint8_t> packed(std::size_t(experts) * rows * k / 2), scales(std::size_t(experts) * rows * kblocks);
  for (auto& b : packed) b = std::uint8_t(rng());
  for (auto& s : scales) s = std::uint8_t(118 + rng() % 12);
  scales[5] = 0xFF;       // expert 0, row 0: a NaN-scale block, flushed
  scales[kblocks] = 100;  // expert 0, row 1, block 0: far below its row's largest, flushed
  std::vector<float> want(packed.size() * 2);
  formats::dequantize_mxfp4(packed.data(), scales.data(), want.size(), want.data());
  for (bool interleave : {false, true}) {
    INFO("interleave " << interleave);
    const TensorCoreWeights v3 = to_tensor_core_layout(packed.data(), scales.data(), experts, rows, k, interleave);
    CHECK(v3.flushed_blocks >= 1);
    const std::vector<std::uint8_t> out = to_fp8_resident_layout(v3, experts, rows, k);
    const std::size_t bytes = fp8_resident_expert_bytes(rows, k);
    REQUIRE(out.size() == experts * bytes);
    long long mismatches = 0, flushed_values = 0;
    for (int e = 0; e < experts; ++e)
      for (int r = 0; r < 256; ++r)  // 192 rows, then the padding of the second group
        for (int kk = 0; kk < k; ++kk) {
          const std::uint8_t byte = out[e * bytes + fp8_resident_at(r, kk, k)];
          if (r >= rows) {
            mismatches += byte != 0;
            continue;
          }
          const int src = tensor_core_source_row(r, rows, interleave);
          const std::size_t at = (std::size_t(e) * rows + src) * k + kk;
          const std::uint8_t scale = scales[(std::size_t(e) * rows + src) * kblocks + kk / 32];
          const bool flushed = scale == 0xFF || (e == 0 && src == 1 && kk < 32);
          const float got = formats::e4m3_to_float(byte) * v3.row_scale[std::size_t(e) * rows + r];
          flushed_values += flushed;
          mismatches += flushed ? got != 0.f : got != want[at];
        }
    CHECK(flushed_values == 2 * 32);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("fp8-resident layout of several experts (in parallel) matches each expert's own", "[weights][fp8]") {
  const int experts = 5, rows = 128, k = 128;
  std::mt19937 rng(13);
  std::vector<std::uint8_t> packed(std::size_t(experts) * rows * k / 2), scales(std::size_t(experts) * rows * k / 32);
  for (auto& b : packed) b = std::uint8_t(rng());
  for (auto& s : scales) s = std::uint8_t(120 + rng() % 8);
  const std::vector<std::uint8_t> all =
      to_fp8_resident_layout(to_tensor_core_layout(packed.data(), scales.data(), experts, rows, k, true), experts, rows, k);
  const std::size_t bytes = fp8_resident_expert_bytes(rows, k);
  for (int e = 0; e < experts; ++e) {
    const TensorCoreWeights one = to_tensor_core_layout(packed.data() + std::size_t(e) * rows * k / 2,
                                                        scales.data() + std::size_t(e) * rows * k / 32, 1, rows, k, true);
    const std::vector<std::uint8_t> mine = to_fp8_resident_layout(one, 1, rows, k);
    INFO("expert " << e);
    CHECK(std::equal(mine.begin(), mine.end(), all.begin() + e * bytes));
  }
}
