// The rate of an fp8 grouped GEMM with both wgmma operands in shared memory (the first step
// towards the fp8-resident weights, docs/hopper-plan.md): Kimi-K3's GEMM1 (6144 x 3584 per
// expert) and GEMM2 (3584 x 3072) over 112 experts at 146 to 1170 rows per expert, the weights
// random MXFP4 in the library's fp8-resident layout
// (src/weights/fp8_resident_layout: layout v3's in-register conversion stored as e4m3, a scale per
// row), the activations e4m3 with a scale per token and 128 (or 256) of K, as the Hopper path's
// stages have them. A
// persistent, warp-specialised kernel: one producer thread moves each 128-row weight chunk and
// the token tile's chunk with bulk copies onto mbarriers; two consumer warpgroups multiply (SS
// wgmma m64nNk32, a chunk of 128 K in four) in turn, promote each scale block's sums into fp32
// totals and write bf16 through shared memory with bulk stores. The forms measured on the way
// there (plain stores, one thread's stores, chunk-by-chunk waits, clusters) are in the journal
// (docs/journal/, 2026-12) and the git history. cuBLASLt's one GEMM over all the rows (the same FLOPs) is timed in the same run.
// Sampled rows of three experts (every token) are checked against fp64 sums over the MXFP4
// dequantization of the weights (src/formats). Built and run by
// `tools/profile/microbench.sh grouped_ss_rate` (nvcc, sm_90a, links cuBLASLt); arguments
// [GEMM1|GEMM2 [ROWS [--no-store]]] run one shape, or one shape at one row count (for ncu);
// --no-store skips the epilogue's stores (and the check): the main loop's own rate.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <thread>

#include "formats/formats.hpp"
#include "hopper/pipeline.cuh"
#include "hopper/wgmma.cuh"
#include "hopper/wgmma_ss_e4m3.cuh"
#include "moe/hopper_fp8_ss_loop.cuh"  // IssueTurns
#include "weights/fp8_resident_layout.hpp"

using namespace megamoe;

namespace {

#define CUDA_OK(x)                                                                      \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr int kRowsPerTile = 128;  // weight rows of a block's tile: 64 per consumer warpgroup
constexpr int kChunkBytes = kRowsPerTile * 128;
constexpr int kRowPad = 8;  // each expert's token rows start at a multiple of 8 (the swizzle's period)

struct Params {
  const u8* w;           // [expert][row tile][chunk][128 rows][128 B], each chunk in the 128-byte swizzle
  const float* w_scale;  // [expert][M]
  const u8* x;           // [chunk][rows_pad][128 B], swizzled by absolute row
  const float* x_scale;  // [scale block][rows_pad]
  __nv_bfloat16* out;    // [expert][M][ld]: the expert's tokens, padded to whole token tiles
  const int* row0;       // [experts + 1]: each expert's first token row in x (padded)
  const int* tile0;      // [experts + 1]: each expert's first tile
  int experts, M, K, rows_pad, rows, ld;  // rows: tokens per expert
  int store;                          // 0: no epilogue stores (a diagnostic: the main loop's own rate)
};

template <int N, int kStages>
struct Smem {
  static constexpr int kB = N * 128, kScales = N * 4;
  static constexpr int kStage = (kChunkBytes + kB + kScales + 1023) / 1024 * 1024;
  // The epilogue's region: each consumer warpgroup's 64 output rows of bf16, padded by 16 bytes (banks).
  static constexpr int kRowBytes = 2 * N + 16, kRegion = 64 * kRowBytes;
  static constexpr int kBytes = 1024 + kStages * kStage + 2 * kRegion + 2 * kStages * 8;
};

// The async proxy's view of shared memory, and bulk stores from it to global memory.
MM_DEVICE void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
MM_DEVICE void bulk_store_s2g(void* dst, const void* src, u32 bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(sm_addr(src)), "r"(bytes)
               : "memory");
}
MM_DEVICE void bulk_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
MM_DEVICE void bulk_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

// Per scale block, its chunks' wgmma issued back to back in the warpgroup's turn (IssueTurns, as
// the library's fp8-resident kernels take them) and waited for once, then promoted. The epilogue:
// each warp writes its 16 rows into shared memory and a lane per row stores it with a bulk copy,
// which runs while the warpgroup starts its next tile.
template <int N, int kStages, int kChunksPerScale>
__global__ void __launch_bounds__(384, 1) grouped_ss(Params p) {
  using S = Smem<N, kStages>;
  constexpr int NT = N / 8;
  extern __shared__ u8 raw[];
  u8* smem = reinterpret_cast<u8*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  u64* full = reinterpret_cast<u64*>(smem + kStages * S::kStage + 2 * S::kRegion);
  u64* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
    mbar_init_fence();
  }
  __syncthreads();
  const int chunks = p.K / 128, row_tiles = p.M / kRowsPerTile;
  const int total = p.tile0[p.experts];
  auto decode = [&](int t, int& e, int& rt, int& tt) {
    int lo = 0, hi = p.experts - 1;  // the expert whose tiles hold t
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.tile0[mid] <= t) lo = mid;
      else hi = mid - 1;
    }
    e = lo;
    const int tiles_e = (p.rows + N - 1) / N, local = t - p.tile0[e];
    rt = local / tiles_e, tt = local % tiles_e;  // a weight tile's token tiles run together (L2)
  };
  if (threadIdx.x < 128) {  // the producer warpgroup: one thread issues every copy
    regs_dealloc<40>();
    if (threadIdx.x != 0) return;
    int s = 0;
    u32 phase = 0;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
      int e, rt, tt;
      decode(t, e, rt, tt);
      const u8* a = p.w + (std::size_t(e) * row_tiles + rt) * chunks * kChunkBytes;
      const int r0 = p.row0[e] + tt * N;
      for (int c = 0; c < chunks; ++c) {
        mbar_wait(&empty[s], phase ^ 1);
        u8* st = smem + s * S::kStage;
        mbar_arrive_expect_tx(&full[s], kChunkBytes + S::kB + S::kScales);
        bulk_copy_g2s(st, a + std::size_t(c) * kChunkBytes, kChunkBytes, &full[s]);
        bulk_copy_g2s(st + kChunkBytes, p.x + (std::size_t(c) * p.rows_pad + r0) * 128, S::kB, &full[s]);
        bulk_copy_g2s(st + kChunkBytes + S::kB, p.x_scale + std::size_t(c / kChunksPerScale) * p.rows_pad + r0,
                      S::kScales, &full[s]);
        if (++s == kStages) s = 0, phase ^= 1;
      }
    }
    return;
  }
  regs_alloc<232>();
  const int wg = threadIdx.x / 128 - 1, warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  int s = 0;
  u32 phase = 0;
  IssueTurns turns;
  for (int t = blockIdx.x; t < total; t += gridDim.x) {
    int e, rt, tt;
    decode(t, e, rt, tt);
    float tot[NT][4];
    for (int j = 0; j < NT; ++j)
      for (int c = 0; c < 4; ++c) tot[j][c] = 0.f;
    auto issue = [&](float(&acc)[NT][4], bool fresh) {  // the chunk in stage s: 4 wgmma
      mbar_wait(&full[s], phase);
      u8* st = smem + s * S::kStage;
      const u64 da = wg_desc_sw128(st + wg * (kChunkBytes / 2)), db = wg_desc_sw128(st + kChunkBytes);
      wg_fence_acc(acc);
      wg_fence();
      for (int kb = 0; kb < 4; ++kb) WgmmaE4m3SS<N>::mma(acc, da + 2 * kb, db + 2 * kb, fresh && kb == 0 ? 0 : 1);
      wg_commit();
    };
    auto promote = [&](float(&acc)[NT][4], int stage) {  // a scale block's sums
      wg_fence_acc(acc);
      const u32 xs = sm_addr(smem + stage * S::kStage + kChunkBytes + S::kB) + 8 * tq;
      for (int j = 0; j < NT; ++j) {
        float s0, s1;  // the two tokens' scales, read as shared memory (not through a generic address)
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(s0), "=f"(s1) : "r"(xs + 32 * j));
        tot[j][0] += acc[j][0] * s0, tot[j][1] += acc[j][1] * s1;
        tot[j][2] += acc[j][2] * s0, tot[j][3] += acc[j][3] * s1;
      }
    };
    auto release = [&](int stage) {
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[stage]);
    };
    float acc[NT][4];
    for (int c = 0; c < chunks; c += kChunksPerScale) {
      int st[kChunksPerScale];
      turns.before(wg);
      for (int i = 0; i < kChunksPerScale; ++i) {
        st[i] = s, issue(acc, i == 0);
        if (++s == kStages) s = 0, phase ^= 1;
      }
      turns.after(wg);
      wg_wait<0>();
      promote(acc, st[kChunksPerScale - 1]);
      for (int i = 0; i < kChunksPerScale; ++i) release(st[i]);
    }
    // Epilogue: out[e][row][token] = tot * the row's scale (columns past the expert's tokens land
    // in its padding).
    if (!p.store) {
      if (tot[0][0] == 12345.f) p.out[0] = __float2bfloat16(tot[NT - 1][3]);  // keeps the sums live
      continue;
    }
    const int row = rt * kRowsPerTile + wg * 64 + warp * 16 + g;
    const float w0 = p.w_scale[std::size_t(e) * p.M + row], w1 = p.w_scale[std::size_t(e) * p.M + row + 8];
    u8* region = smem + kStages * S::kStage + wg * S::kRegion;
    if (lane < 16) bulk_store_wait_read();  // this lane's row of the previous tile has been read
    __syncwarp();
    u8* r0 = region + (warp * 16 + g) * S::kRowBytes;
    for (int j = 0; j < NT; ++j) {
      const int col = 8 * j + 2 * tq;
      *reinterpret_cast<__nv_bfloat162*>(r0 + col * 2) = __floats2bfloat162_rn(tot[j][0] * w0, tot[j][1] * w0);
      *reinterpret_cast<__nv_bfloat162*>(r0 + 8 * S::kRowBytes + col * 2) =
          __floats2bfloat162_rn(tot[j][2] * w1, tot[j][3] * w1);
    }
    fence_proxy_async_smem();  // the rows, written by this warp, seen by the bulk copies
    __syncwarp();
    if (lane < 16) {
      const int r = warp * 16 + lane;
      __nv_bfloat16* o = p.out + (std::size_t(e) * p.M + rt * kRowsPerTile + wg * 64 + r) * p.ld + tt * N;
      bulk_store_s2g(o, region + r * S::kRowBytes, 2 * N);
      bulk_store_commit();
    }
  }
  turns.finish(wg);
  if (lane < 16) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // all stores done
}

// The activations' bytes and scales, from a hash of their indices, so that the GPU fills them and
// the host recomputes the ones it checks: e4m3 of moderate magnitude (no NaN), scales powers of
// two near 1.
__host__ __device__ inline u32 mix(u32 a, u32 b, u32 c) {
  u32 h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du;
  h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
  return h;
}
__host__ __device__ inline u8 w_byte(int e, int row, int k) {
  const u32 h = mix(u32(e), u32(row), u32(k));
  return u8((h & 0x80) | (0x20 + (h >> 8) % 0x38));
}
__host__ __device__ inline u8 x_byte(int row, int k) { return w_byte(1000003, row, k); }
__host__ __device__ inline float x_scale(int row, int block) { return 1.f / float(1 << (mix(9u, u32(row), u32(block)) % 4)); }

// x: [chunk][rows_pad][128 B], swizzled by absolute row; its scales [block][rows_pad].
__global__ void fill_x(u8* x, float* xs, int rows_pad, int K, int per_scale) {
  const std::size_t n = std::size_t(K / 128) * rows_pad * 128;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const int c = int(i / (std::size_t(rows_pad) * 128)), o = int(i % (std::size_t(rows_pad) * 128));
    const int r = o / 128, b = ((((o % 128) >> 4) ^ (r & 7)) << 4) | (o & 15);
    x[i] = x_byte(r, c * 128 + b);
    if (b == 0 && c % per_scale == 0) xs[std::size_t(c / per_scale) * rows_pad + r] = x_scale(r, c / per_scale);
  }
}
__global__ void fill_bytes(u8* p, std::size_t n, u32 seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = w_byte(int(seed), int(i >> 20), int(i & 0xFFFFF));
}

float e4m3_table[256];
void make_e4m3_table() {
  for (int v = 0; v < 256; ++v) {
    const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
    const float f = e == 0 ? std::ldexp(float(m) / 8.f, -6) : std::ldexp(1.f + float(m) / 8.f, e - 7);
    e4m3_table[v] = s ? -f : f;
  }
}
float bf16_value(__nv_bfloat16 h) {
  unsigned short u;
  std::memcpy(&u, &h, 2);
  const unsigned int w = unsigned(u) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

struct Shape {
  const char* name;
  int M, K;
};

float median_ms(std::vector<float> t) {
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// cuBLASLt e4m3 x e4m3 -> bf16, D[m x n] = A^T B with A k x m and B k x n (both K-major), random
// bytes: the median ms of 20 runs after 5.
float cublaslt_ms(int m, int n, int k) {
  u8 *a, *b;
  __nv_bfloat16* d;
  void* ws;
  const std::size_t wsb = 64 << 20;
  CUDA_OK(cudaMalloc(&a, std::size_t(m) * k));
  CUDA_OK(cudaMalloc(&b, std::size_t(n) * k));
  CUDA_OK(cudaMalloc(&d, std::size_t(m) * n * 2));
  CUDA_OK(cudaMalloc(&ws, wsb));
  fill_bytes<<<1024, 256>>>(a, std::size_t(m) * k, 1);
  fill_bytes<<<1024, 256>>>(b, std::size_t(n) * k, 2);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t tr = CUBLAS_OP_T, no = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof no);
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &heur, &found);
  float ms = -1;
  if (found) {
    const float alpha = 1.f, beta = 0.f;
    std::vector<float> t;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    for (int i = 0; i < 25; ++i) {
      cudaEventRecord(e0);
      cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur.algo, ws, wsb, 0);
      cudaEventRecord(e1);
      CUDA_OK(cudaEventSynchronize(e1));
      float x;
      cudaEventElapsedTime(&x, e0, e1);
      if (i >= 5) t.push_back(x);
    }
    ms = median_ms(t);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(h);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(ws);
  return ms;
}

// Random MXFP4 weights of `experts` matrices of M x K (checkpoint row order; W1's gate rows then
// its up rows), in the fp8-resident layout on the GPU, and what the check needs on the host.
struct Weights {
  u8* w = nullptr;
  float* ws = nullptr;  // layout v3's row scales, by layout row
  std::vector<std::uint8_t> packed, scales;
  bool interleave = false;
};

Weights make_weights(const Shape& sh, int experts) {
  Weights wt;
  wt.interleave = std::strcmp(sh.name, "GEMM1") == 0;  // W1: gate and up rows interleaved by slab
  const std::size_t per = std::size_t(sh.M) * sh.K;
  wt.packed.resize(experts * per / 2), wt.scales.resize(experts * per / 32);
  std::vector<std::thread> pool;
  const int workers = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 0; t < workers; ++t)
    pool.emplace_back([&, t] {
      for (int e = t; e < experts; e += workers) {
        std::mt19937 rng(1000 + e);
        for (std::size_t i = 0; i < per / 2; ++i) wt.packed[e * per / 2 + i] = std::uint8_t(rng());
        for (std::size_t i = 0; i < per / 32; ++i) wt.scales[e * per / 32 + i] = std::uint8_t(120 + rng() % 8);
      }
    });
  for (auto& t : pool) t.join();
  const TensorCoreWeights v3 = to_tensor_core_layout(wt.packed.data(), wt.scales.data(), experts, sh.M, sh.K, wt.interleave);
  if (v3.flushed_blocks) std::printf("note: %zu blocks flushed by the layout\n", v3.flushed_blocks);
  const std::vector<std::uint8_t> bytes = to_fp8_resident_layout(v3, experts, sh.M, sh.K);
  CUDA_OK(cudaMalloc(&wt.w, bytes.size()));
  CUDA_OK(cudaMalloc(&wt.ws, v3.row_scale.size() * 4));
  CUDA_OK(cudaMemcpy(wt.w, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(wt.ws, v3.row_scale.data(), v3.row_scale.size() * 4, cudaMemcpyHostToDevice));
  return wt;
}

// One kernel variant on one shape at `rows` tokens per expert: runs it, checks sampled rows of
// three experts' outputs (every token), prints ms and TFLOP/s beside cuBLASLt's. False on a wrong
// output.
template <int N, int kStages, int kChunksPerScale>
bool run_shape(const Shape& sh, const Weights& wt, int experts, int rows, float cublas_ms, bool store) {
  const int M = sh.M, K = sh.K, row_tiles = M / kRowsPerTile;
  const int tiles_e = (rows + N - 1) / N, padded = (rows + kRowPad - 1) / kRowPad * kRowPad;
  const int rows_pad = experts * padded + N;  // a last tile's copy may run past the last expert
  std::vector<int> row0(experts + 1), tile0(experts + 1);
  for (int e = 0; e <= experts; ++e) row0[e] = e * padded, tile0[e] = e * row_tiles * tiles_e;
  u8* dx;
  float* dxs;
  __nv_bfloat16* dout;
  int *drow0, *dtile0;
  const int ld = tiles_e * N;
  const std::size_t out_elems = std::size_t(experts) * M * ld;
  CUDA_OK(cudaMalloc(&dx, std::size_t(K / 128) * rows_pad * 128));
  CUDA_OK(cudaMalloc(&dxs, std::size_t(K / 128) * rows_pad * 4));
  CUDA_OK(cudaMalloc(&dout, out_elems * 2));
  CUDA_OK(cudaMalloc(&drow0, row0.size() * 4));
  CUDA_OK(cudaMalloc(&dtile0, tile0.size() * 4));
  fill_x<<<1024, 256>>>(dx, dxs, rows_pad, K, kChunksPerScale);
  CUDA_OK(cudaMemcpy(drow0, row0.data(), row0.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dtile0, tile0.data(), tile0.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout, 0xFF, out_elems * 2));  // NaN poison
  const Params p{wt.w, wt.ws, dx, dxs, dout, drow0, dtile0, experts, M, K, rows_pad, rows, ld, store ? 1 : 0};

  using S = Smem<N, kStages>;
  static_assert(S::kBytes <= 227 * 1024, "an H200 block has at most 227 KB of shared memory");
  auto kernel = grouped_ss<N, kStages, kChunksPerScale>;
  CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kBytes));
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = std::min(sms, tile0[experts]);
  std::vector<float> t;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  for (int i = 0; i < 13; ++i) {
    cudaEventRecord(e0);
    kernel<<<grid, 384, S::kBytes>>>(p);
    cudaEventRecord(e1);
    CUDA_OK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 3) t.push_back(ms);
  }
  CUDA_OK(cudaGetLastError());
  const float ms = median_ms(t);

  std::vector<__nv_bfloat16> out(out_elems);
  CUDA_OK(cudaMemcpy(out.data(), dout, out_elems * 2, cudaMemcpyDeviceToHost));
  double worst = 0;
  long long bad = 0, checked = 0;
  const int scale_blocks = K / 128 / kChunksPerScale;
  std::vector<float> xrow(K);
  for (int e : {0, experts / 2 + 1, experts - 1}) {
    if (!store) break;
    std::vector<int> sampled;
    for (int r = (e * 37) % 19; r < M; r += 509) sampled.push_back(r);
    std::vector<float> wrows(sampled.size() * K);  // layout row r: checkpoint row tensor_core_source_row(r)
    for (std::size_t i = 0; i < sampled.size(); ++i) {
      const std::size_t src = std::size_t(e) * M + tensor_core_source_row(sampled[i], M, wt.interleave);
      formats::dequantize_mxfp4(wt.packed.data() + src * K / 2, wt.scales.data() + src * K / 32, K, &wrows[i * K]);
    }
    std::vector<double> want(sampled.size() * rows);
    for (int tok = 0; tok < rows; ++tok) {
      const int xr = row0[e] + tok;
      for (int k = 0; k < K; ++k) xrow[k] = e4m3_table[x_byte(xr, k)];
      for (std::size_t i = 0; i < sampled.size(); ++i) {
        const float* wr = wrows.data() + i * K;
        double sum = 0;
        for (int sb = 0; sb < scale_blocks; ++sb) {
          double acc = 0;
          for (int k = sb * kChunksPerScale * 128; k < (sb + 1) * kChunksPerScale * 128; ++k) acc += double(wr[k]) * xrow[k];
          sum += acc * x_scale(xr, sb);
        }
        want[i * rows + tok] = sum;
      }
    }
    // Within bf16's rounding of each output, plus 1e-3 of the row's rms per chunk summed before a
    // promotion (the fp8 wgmma adds in less than fp32's precision), for sums near zero.
    for (std::size_t i = 0; i < sampled.size(); ++i) {
      double rms = 0;
      for (int tok = 0; tok < rows; ++tok) rms += want[i * rows + tok] * want[i * rows + tok];
      rms = std::sqrt(rms / rows);
      for (int tok = 0; tok < rows; ++tok) {
        const double w = want[i * rows + tok];
        const double got = bf16_value(out[(std::size_t(e) * M + sampled[i]) * ld + tok]);
        const double err = std::fabs(got - w) / (std::fabs(w) + 0.1 * rms);
        worst = std::max(worst, err);
        bad += !(std::fabs(got - w) <= 8e-3 * std::fabs(w) + 1e-3 * kChunksPerScale * rms);  // NaN counts as bad
        ++checked;
      }
    }
  }
  const double flops = 2.0 * experts * double(rows) * M * K;
  std::printf("%-6s rows/expert %5d  N %3d stages %d x_block %3d: %7.3f ms %7.1f TFLOP/s | cuBLASLt one GEMM %7.3f ms "
              "%7.1f TFLOP/s | time / cuBLASLt %.2f | %s %lld outputs, worst err %.1e, %lld bad\n",
              sh.name, rows, N, kStages, 128 * kChunksPerScale, ms, flops / (ms * 1e9), cublas_ms,
              flops / (cublas_ms * 1e9), ms / cublas_ms, store ? "check" : "no stores, unchecked:", checked, worst, bad);
  std::fflush(stdout);
  cudaFree(dx), cudaFree(dxs), cudaFree(dout), cudaFree(drow0), cudaFree(dtile0);
  return bad == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Optional filters: a shape (GEMM1 or GEMM2) and a rows-per-expert count, e.g. for ncu.
  const char* only_shape = argc > 1 ? argv[1] : nullptr;
  const int only_rows = argc > 2 ? std::atoi(argv[2]) : 0;
  const bool store = !(argc > 3 && std::strcmp(argv[3], "--no-store") == 0);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no GPU: built only\n");
    return 0;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  make_e4m3_table();
  const int experts = 112;
  const Shape shapes[] = {{"GEMM1", 6144, 3584}, {"GEMM2", 3584, 3072}};
  bool ok = true;
  for (const Shape& sh : shapes) {
    if (only_shape && std::strcmp(only_shape, sh.name) != 0) continue;
    Weights wt = make_weights(sh, experts);
    for (int rows : {146, 292, 585, 1170}) {
      if (only_rows && rows != only_rows) continue;
      const float cub = cublaslt_ms(sh.M, experts * rows, sh.K);
      ok &= run_shape<160, 4, 2>(sh, wt, experts, rows, cub, store);  // x per 256, as Stage1 takes it
      ok &= run_shape<160, 4, 1>(sh, wt, experts, rows, cub, store);  // x per 128, as Stage2 takes h
      ok &= run_shape<192, 4, 2>(sh, wt, experts, rows, cub, store);
    }
    cudaFree(wt.w), cudaFree(wt.ws);
  }
  std::printf("%s\n", ok ? "all checks passed" : "CHECK FAILED");
  return ok ? 0 : 1;
}
