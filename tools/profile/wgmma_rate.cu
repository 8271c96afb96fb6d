// What the Hopper kernels' wgmma cost a warpgroup, by token-tile width N: loops of `wgmma.fence`,
// four RS wgmma m64nNk32 e4m3 (A from registers, B from shared memory; templates/hopper/wgmma.cuh),
// `commit` and `wait 0`, with 1 or 2 warpgroups per block and 1 or 2 blocks per SM, the fragments
// reloaded from shared memory every loop as the kernels do. Prints cycles per loop and warpgroup
// (split into the issue and the wait) and wgmma per SM per nanosecond. Built and run by
// `tools/profile/microbench.sh wgmma_rate` on a machine with a Hopper GPU; no result is checked.
#include <cstdio>

#include <cuda_runtime.h>

#include "hopper/wgmma.cuh"

using namespace megamoe;

namespace {

constexpr int kReps = 2000;
constexpr int kOperandBytes = 8192;  // the fragments' source; B follows it

template <int N>
__global__ void __launch_bounds__(256) wgmma_loops(int reps, long long* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x;
  for (int i = tid; i < kOperandBytes + N * 128; i += blockDim.x) smem[i] = (unsigned char)(0x30 + (i & 7));
  __syncthreads();
  float p[N / 8][4];
  for (int j = 0; j < N / 8; ++j)
    for (int c = 0; c < 4; ++c) p[j][c] = 0.f;
  u32 a[4][4];
  const u64 desc = wg_desc_sw128(smem + kOperandBytes);
  long long issue = 0, wait = 0;
  const long long t0 = clock64();
  for (int it = 0; it < reps; ++it) {
    const u32* src = reinterpret_cast<const u32*>(smem + ((it & 7) * 512 + (tid & 127) * 4) % kOperandBytes);
    for (int k = 0; k < 4; ++k)
      for (int r = 0; r < 4; ++r) a[k][r] = src[k * 4 + r];
    const long long s0 = clock64();
    wg_fence_acc(p);
    wg_fence();
    for (int kb = 0; kb < 4; ++kb) WgmmaE4m3<N>::mma(p, a[kb], desc + 2 * kb, kb);
    wg_commit();
    wg_fence_acc(p);
    const long long s1 = clock64();
    wg_wait<0>();
    wg_fence_acc(p);
    const long long s2 = clock64();
    issue += s1 - s0, wait += s2 - s1;
  }
  const long long t1 = clock64();
  float sink = 0;
  for (int j = 0; j < N / 8; ++j)
    for (int c = 0; c < 4; ++c) sink += p[j][c];
  if (tid % 128 == 0) {
    long long* o = out + (blockIdx.x * 2 + tid / 128) * 4;
    o[0] = t1 - t0, o[1] = issue, o[2] = wait, o[3] = (long long)sink;  // sink keeps the sums live
  }
}

template <int N>
bool run(int warpgroups, int blocks_per_sm, int sms) {
  const int blocks = sms * blocks_per_sm, smem = kOperandBytes + (N * 128 + 1023) / 1024 * 1024 + 1024;
  long long* d = nullptr;
  cudaMalloc(&d, size_t(blocks) * 2 * 4 * sizeof(long long));
  cudaFuncSetAttribute(wgmma_loops<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  wgmma_loops<N><<<blocks, 128 * warpgroups, smem>>>(10, d);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  cudaEventRecord(e0);
  wgmma_loops<N><<<blocks, 128 * warpgroups, smem>>>(kReps, d);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  long long h[4] = {};
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  cudaFree(d);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "wgmma_rate: N %d: %s\n", N, cudaGetErrorString(err));
    return false;
  }
  const double per_sm = 4.0 * kReps * warpgroups * blocks_per_sm;
  std::printf("N %3d  %d WG/block  %d blocks/SM: %5.0f cycles per loop of 4 wgmma (issue %4.0f, wait %4.0f), "
              "%5.1f ns per wgmma per SM\n",
              N, warpgroups, blocks_per_sm, double(h[0]) / kReps, double(h[1]) / kReps, double(h[2]) / kReps,
              ms * 1e6 / per_sm);
  return true;
}

}  // namespace

int main() {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    std::fprintf(stderr, "wgmma_rate: no GPU\n");
    return 3;
  }
  bool ok = true;
  for (int wg = 1; wg <= 2; ++wg)
    for (int b = 1; b <= 2; ++b) ok = run<16>(wg, b, sms) && run<32>(wg, b, sms) && run<80>(wg, b, sms) && ok;
  return ok ? 0 : 1;
}
