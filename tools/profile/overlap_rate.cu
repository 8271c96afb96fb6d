// Whether a warpgroup's wgmma and another warpgroup's arithmetic overlap on one SM, as the Hopper
// kernels assume (one warpgroup's wgmma run while the other converts and promotes): warpgroup 0
// loops over four RS wgmma m64n160k32 e4m3 (the 160-token tiles' chunk; templates/hopper/wgmma.cuh),
// warpgroup 1 over independent FFMA (as the promotion), integer ops (as the conversion) or both,
// each alone and together, one block per SM; then the same with the wgmma's A in shared memory
// (SS). Prints cycles per loop of each; where they overlap, running both costs each about what it
// costs alone. Built and run by
// `tools/profile/microbench.sh overlap_rate` on a machine with a Hopper GPU; no result is checked.
#include <cstdio>

#include <cuda_runtime.h>

#include "hopper/wgmma.cuh"
#include "hopper/wgmma_ss_e4m3.cuh"

using namespace megamoe;

namespace {

constexpr int N = 160, kOperandBytes = 8192;

// kMma: warpgroup 0 runs `reps` loops of four wgmma (kSS: A from shared memory); kAlu (bits): warpgroup 1 runs `reps` loops of
// 64 FFMA (1) and 64 integer ops (2). out[block][2]: cycles of each warpgroup's loop.
template <bool kMma, int kAlu, bool kSS = false>
__global__ void __launch_bounds__(256, 1) overlap(int reps, long long* out, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x, wg = tid / 128;
  for (int i = tid; i < kOperandBytes + N * 128; i += blockDim.x) smem[i] = (unsigned char)(0x30 + (i & 7));
  __syncthreads();
  long long cycles = 0;
  float keep = 0.f;
  if (wg == 0 && kMma) {
    float p[N / 8][4];
    for (int j = 0; j < N / 8; ++j)
      for (int c = 0; c < 4; ++c) p[j][c] = 0.f;
    u32 a[4][4];
    const u64 desc = wg_desc_sw128(smem + kOperandBytes), desc_a = wg_desc_sw128(smem);
    const long long t0 = clock64();
    for (int it = 0; it < reps && kSS; ++it) {
      wg_fence_acc(p);
      wg_fence();
      for (int kb = 0; kb < 4; ++kb) WgmmaE4m3SS<N>::mma(p, desc_a + 2 * kb, desc + 2 * kb);
      wg_commit();
      wg_wait<0>();
      wg_fence_acc(p);
    }
    for (int it = 0; it < reps && !kSS; ++it) {
      const u32* src = reinterpret_cast<const u32*>(smem + ((it & 7) * 512 + (tid & 127) * 4) % kOperandBytes);
      for (int k = 0; k < 4; ++k)
        for (int r = 0; r < 4; ++r) a[k][r] = src[k * 4 + r];
      wg_fence_acc(p);
      wg_fence();
      for (int kb = 0; kb < 4; ++kb) WgmmaE4m3<N>::mma(p, a[kb], desc + 2 * kb, 1);
      wg_commit();
      wg_wait<0>();
      wg_fence_acc(p);
    }
    cycles = clock64() - t0;
    for (int j = 0; j < N / 8; ++j)
      for (int c = 0; c < 4; ++c) keep += p[j][c];
  } else if (wg == 1 && kAlu) {
    float f[64];
    u32 w[16];
    for (int i = 0; i < 64; ++i) f[i] = float(tid + i);
    for (int i = 0; i < 16; ++i) w[i] = 0x9E3779B9u * u32(tid + i);
    const long long t0 = clock64();
    for (int it = 0; it < reps; ++it) {
      const float x = __int_as_float(0x3f800000 | (it & 0xff)), y = float(it & 7);
      if (kAlu & 1)
        for (int i = 0; i < 64; ++i) f[i] = fmaf(f[i], x, y);
      if (kAlu & 2)
        for (int i = 0; i < 16; ++i) {
          const u32 m = w[i] & 0x77777777u;
          w[i] = __byte_perm(w[(i + 1) & 15], m, m) | ((w[i] << 4) & 0x80808080u) ^ u32(it);
        }
    }
    cycles = clock64() - t0;
    for (int i = 0; i < 64; ++i) keep += f[i];
    for (int i = 0; i < 16; ++i) keep += float(w[i] & 0xff);
  }
  if (tid % 128 == 0) out[blockIdx.x * 2 + wg] = cycles;
  if (keep == 12345.f) sink[tid] = keep;  // keeps the loops' results live
}

template <bool kMma, int kAlu, bool kSS = false>
bool run(const char* label, int sms, int reps) {
  const int smem = kOperandBytes + N * 128 + 1024;
  long long* d = nullptr;
  float* sink = nullptr;
  cudaMalloc(&d, size_t(sms) * 2 * sizeof(long long));
  cudaMalloc(&sink, 256 * sizeof(float));
  cudaFuncSetAttribute(overlap<kMma, kAlu, kSS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  overlap<kMma, kAlu, kSS><<<sms, 256, smem>>>(10, d, sink);  // warm-up
  overlap<kMma, kAlu, kSS><<<sms, 256, smem>>>(reps, d, sink);
  long long h[2] = {};
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  cudaFree(d), cudaFree(sink);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "overlap_rate: %s: %s\n", label, cudaGetErrorString(err));
    return false;
  }
  std::printf("%-34s wgmma loop %6.0f cycles, arithmetic loop %6.0f cycles\n", label, double(h[0]) / reps,
              double(h[1]) / reps);
  return true;
}

}  // namespace

int main() {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    std::fprintf(stderr, "overlap_rate: no GPU\n");
    return 3;
  }
  constexpr int kReps = 4000;
  bool ok = run<true, 0>("wgmma alone", sms, kReps);
  ok = run<false, 1>("FFMA alone", sms, kReps) && ok;
  ok = run<false, 2>("integer ops alone", sms, kReps) && ok;
  ok = run<false, 3>("FFMA and integer ops alone", sms, kReps) && ok;
  ok = run<true, 1>("wgmma beside FFMA", sms, kReps) && ok;
  ok = run<true, 2>("wgmma beside integer ops", sms, kReps) && ok;
  ok = run<true, 3>("wgmma beside FFMA and integer ops", sms, kReps) && ok;
  ok = run<true, 0, true>("SS wgmma alone", sms, kReps) && ok;
  ok = run<true, 1, true>("SS wgmma beside FFMA", sms, kReps) && ok;
  ok = run<true, 2, true>("SS wgmma beside integer ops", sms, kReps) && ok;
  ok = run<true, 3, true>("SS wgmma beside FFMA and integer ops", sms, kReps) && ok;
  return ok ? 0 : 1;
}
