// The in-register MXFP4 -> e4m3 conversion of the tensor-core kernels (mma.sync and wgmma), for
// weight layout v3 (src/weights/tensor_core_layout.hpp; decode_tensor_core_word is its host twin).
#pragma once
#include "interface/kernel_constants.cuh"
#include "prelude/megamoe_prelude.cuh"

namespace megamoe {

// A block's unit of one chunk (interface/kernel_constants.cuh), group the block's group of 8
// slabs, chunks = K / 128.
MM_DEVICE const u8* layout_v3_unit(const u8* units, int group, int chunk, int chunks) {
  return units + ((i64)group * chunks + chunk) * kLayoutV3UnitBytes;
}

// A byte permute the compiler cannot narrow: __byte_perm reads only a selector's low 16 bits,
// so the compiler masks each selector on its own (w & 0x7777, w & 0x77770000 then a shift) where
// one mask of the word serves both halves.
MM_DEVICE u32 mm_prmt(u32 a, u32 b, u32 selector) {
#if MEGAMOE_CUDA
  u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
#else
  return __byte_perm(a, b, selector);
#endif
}

// Byte k (0..3) of a word of four signed bytes, sign-extended: one byte permute (selector
// nibbles with bit 3 set replicate the chosen byte's sign).
MM_DEVICE int mm_signed_byte(u32 w, int k) { return int(mm_prmt(w, 0u, 0x8880u + u32(k) * 0x1111u)); }

// e4m3 of 8 e2m1 values of a layout-v3 word, times 2^f (f in [-5, 6]); lo holds k 4t..4t+3,
// hi holds k 16+4t..16+4t+3.
MM_DEVICE void mm_e2m1x8_to_e4m3(u32 w, int f, u32& lo, u32& hi) {
  const u32 f8 = u32(f * 8);
  const u32 lut0 = 0x3C383000u + f8 * 0x01010100u, lut1 = 0x4C484440u + f8 * 0x01010101u;
  const u32 m = w & 0x77777777u;  // the magnitudes (selector nibbles without their sign bit)
  lo = mm_prmt(lut0, lut1, m) | (w & 0x80808080u);
  hi = mm_prmt(lut0, lut1, m >> 16) | ((w << 4) & 0x80808080u);
}

}  // namespace megamoe
