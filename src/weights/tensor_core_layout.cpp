#include "weights/tensor_core_layout.hpp"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "formats/formats.hpp"

namespace megamoe {

namespace {

constexpr int kMinFold = -5, kMaxFold = 6;

// prmt.b32 in its default mode, as __byte_perm: byte n of the result is byte (s >> 4n) & 7 of {y, x}.
std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t s) {
  std::uint64_t both = (std::uint64_t(y) << 32) | x;
  std::uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= std::uint32_t((both >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
}

// k offsets (within a 32-value block) of the 8 values of lane t's word.
int word_k(int t, int i) { return i < 4 ? 4 * t + i : 16 + 4 * t + (i - 4); }

// The start of slab's unit of `chunk` and the slabs in its group (the last group may be short).
struct Unit {
  std::size_t at;
  int size;
};
Unit unit_of(int slab, int chunk, int slabs, int chunks) {
  const int first = slab / kSlabGroup * kSlabGroup, size = std::min<int>(kSlabGroup, slabs - first);
  const std::size_t units_before = std::size_t(first) * chunks + std::size_t(chunk) * size;  // in slabs' shares
  return {units_before * (kSlabWordBytes + kSlabExpBytes), size};
}

}  // namespace

int tensor_core_source_row(int r, int rows, bool interleave) {
  if (!interleave) return r;
  const int slab = r / 16, in = r % 16, half = rows / 2;
  return in < 8 ? 8 * slab + in : half + 8 * slab + (in - 8);
}

void tensor_core_word_e4m3(std::uint32_t w, int f, std::uint8_t out[8]) {
  const std::uint32_t f8 = std::uint32_t(f * 8);
  const std::uint32_t lut0 = 0x3C383000u + f8 * 0x01010100u, lut1 = 0x4C484440u + f8 * 0x01010101u;
  const std::uint32_t lo = byte_perm(lut0, lut1, w & 0x7777u) | (w & 0x80808080u);
  const std::uint32_t hi = byte_perm(lut0, lut1, (w >> 16) & 0x7777u) | ((w << 4) & 0x80808080u);
  for (int i = 0; i < 4; ++i) out[i] = std::uint8_t(lo >> (8 * i)), out[4 + i] = std::uint8_t(hi >> (8 * i));
}

void decode_tensor_core_word(std::uint32_t w, int f, float out[8]) {
  std::uint8_t bytes[8];
  tensor_core_word_e4m3(w, f, bytes);
  for (int i = 0; i < 8; ++i) out[i] = formats::e4m3_to_float(bytes[i]);
}

std::size_t tensor_core_expert_bytes(int rows, int k) { return std::size_t(layout_v3_expert_bytes(rows, k)); }

std::size_t tensor_core_words_at(int slab, int chunk, int slabs, int chunks) {
  return unit_of(slab, chunk, slabs, chunks).at + std::size_t(slab % kSlabGroup) * kSlabWordBytes;
}

std::size_t tensor_core_exps_at(int slab, int chunk, int slabs, int chunks) {
  const Unit u = unit_of(slab, chunk, slabs, chunks);
  return u.at + std::size_t(u.size) * kSlabWordBytes + std::size_t(slab % kSlabGroup) * kSlabExpBytes;
}

TensorCoreWeights to_tensor_core_layout(const std::uint8_t* packed, const std::uint8_t* scales, int experts,
                                        int rows, int k, bool interleave) {
  const int slabs = rows / 16, chunks = k / 128, kblocks = k / 32;
  const std::size_t expert_bytes = tensor_core_expert_bytes(rows, k);
  TensorCoreWeights out;
  out.units.assign(std::size_t(experts) * expert_bytes, 0);
  out.row_scale.assign(std::size_t(experts) * rows, 0.f);
  // Experts are independent and write disjoint ranges: one worker per core takes them in turn.
  std::atomic<int> next{0};
  std::atomic<std::size_t> flushed{0};
  auto worker = [&] {
    for (int e; (e = next++) < experts;) {
      const std::uint8_t* ep = packed + std::size_t(e) * rows * k / 2;
      const std::uint8_t* es = scales + std::size_t(e) * rows * kblocks;
      std::uint8_t* eu = out.units.data() + std::size_t(e) * expert_bytes;
      for (int r = 0; r < rows; ++r) {
        const int src = tensor_core_source_row(r, rows, interleave);
        const std::uint8_t* srow = es + std::size_t(src) * kblocks;
        int smax = -127;
        for (int b = 0; b < kblocks; ++b)
          if (srow[b] != 0xFF) smax = std::max(smax, int(srow[b]) - 127);
        const int base = smax - kMaxFold;
        out.row_scale[std::size_t(e) * rows + r] = std::ldexp(1.f, base);
        const int slab = r / 16, in = r % 16, g = in % 8, half = in / 8;
        for (int b = 0; b < kblocks; ++b) {
          int f = int(srow[b]) - 127 - base;
          const bool flush = srow[b] == 0xFF || f < kMinFold;
          if (flush) {
            f = 0;
            bool nonzero = false;  // an all-zero block loses nothing
            for (int i = 0; i < 16; ++i) nonzero |= (ep[std::size_t(src) * k / 2 + b * 16 + i] & 0x77) != 0;
            flushed += nonzero;
          }
          const int c = b / 4, kb = b % 4;
          eu[tensor_core_exps_at(slab, c, slabs, chunks) + in * 4 + kb] = std::uint8_t(std::int8_t(f));
          std::uint8_t* slab_words = eu + tensor_core_words_at(slab, c, slabs, chunks);
          for (int t = 0; t < 4; ++t) {
            std::uint32_t word = 0;
            for (int i = 0; i < 8; ++i) {
              const int kk = b * 32 + word_k(t, i);
              const std::uint8_t byte = ep[std::size_t(src) * k / 2 + kk / 2];
              std::uint32_t code = flush ? 0 : (kk % 2 ? byte >> 4 : byte & 15);
              const std::uint32_t mag = code & 7, sign = (code >> 3) & 1;
              word |= mag << (4 * i);
              static constexpr int kSignBit[8] = {7, 15, 23, 31, 3, 11, 19, 27};
              word |= sign << kSignBit[i];
            }
            const int lane = g * 4 + t;
            std::memcpy(slab_words + ((lane * 2 + half) * 4 + kb) * 4, &word, 4);
          }
        }
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(experts)));
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < n; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  out.flushed_blocks = flushed;
  return out;
}

}  // namespace megamoe
