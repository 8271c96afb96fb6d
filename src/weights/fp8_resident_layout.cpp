#include "weights/fp8_resident_layout.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace megamoe {

std::size_t fp8_resident_expert_bytes(int rows, int k) {
  const std::size_t groups = (std::size_t(rows) + kFp8ResidentRows - 1) / kFp8ResidentRows;
  return groups * kFp8ResidentRows * std::size_t(k);
}

std::size_t fp8_resident_at(int r, int kk, int k) {
  const int group = r / kFp8ResidentRows, in = r % kFp8ResidentRows, chunk = kk / 128, b = kk % 128;
  const std::size_t chunk_at = (std::size_t(group) * (k / 128) + chunk) * kFp8ResidentRows * 128;
  return chunk_at + std::size_t(in) * 128 + std::size_t((((b >> 4) ^ (in & 7)) << 4) | (b & 15));
}

std::vector<std::uint8_t> to_fp8_resident_layout(const TensorCoreWeights& v3, int experts, int rows, int k) {
  const int slabs = rows / 16, chunks = k / 128;
  const std::size_t v3_bytes = tensor_core_expert_bytes(rows, k), bytes = fp8_resident_expert_bytes(rows, k);
  std::vector<std::uint8_t> out(std::size_t(experts) * bytes, 0);  // e4m3 0x00 is +0: the padding rows
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int e; (e = next++) < experts;) {
      const std::uint8_t* units = v3.units.data() + std::size_t(e) * v3_bytes;
      std::uint8_t* dst = out.data() + std::size_t(e) * bytes;
      for (int r = 0; r < rows; ++r) {
        const int slab = r / 16, in = r % 16, g = in % 8, half = in / 8;
        for (int b = 0; b < k / 32; ++b) {
          const int c = b / 4, kb = b % 4;
          const int f = std::int8_t(units[tensor_core_exps_at(slab, c, slabs, chunks) + in * 4 + kb]);
          for (int t = 0; t < 4; ++t) {
            std::uint32_t word;
            std::memcpy(&word, units + tensor_core_words_at(slab, c, slabs, chunks) + (((g * 4 + t) * 2 + half) * 4 + kb) * 4,
                        4);
            std::uint8_t e4m3[8];
            tensor_core_word_e4m3(word, f, e4m3);
            for (int i = 0; i < 8; ++i) dst[fp8_resident_at(r, b * 32 + (i < 4 ? 4 * t + i : 12 + 4 * t + i), k)] = e4m3[i];
          }
        }
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(experts)));
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < n; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace megamoe
