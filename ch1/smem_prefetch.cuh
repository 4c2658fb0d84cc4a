// smem_prefetch.cuh: one tiled fp32 GEMM, three ways of filling its shared-memory tiles.
// Shared by the smem_prefetch pair's extension (smem_prefetch.cu) and the sample
// (smem_prefetch_demo.cu), so both time exactly the same kernels.
//
// C[M,N] = A[M,K] @ B[K,N], row-major fp32. Every version uses the same tiling: a 256-thread block
// owns a 128x128 tile of C, walks K in 16-wide slices held in shared memory as As[128][16] and
// Bs[16][128], and each thread accumulates an 8x8 patch of C in registers (rows ty + 16i, columns
// 4tx + 64j + c), summing over k in the same order. Only the loads differ:
//
//   1. sync       each thread loads its share of the next slice from global memory into registers,
//                 stores it to shared memory, and the block waits (__syncthreads) before computing:
//                 the load latency is exposed once per slice, hidden only by other resident blocks.
//   2. cp_async   two shared buffers; cp.async (sm_80+) copies slice t+1 global->shared in the
//                 background while slice t is computed; cp.async.wait_group waits for it just in time.
//   3. tma        two shared buffers filled by the Tensor Memory Accelerator (sm_90+): one thread issues
//                 a 2-D bulk tensor copy per operand per slice (cp.async.bulk.tensor, described by a
//                 CUtensorMap built on the host); the copy engine computes the addresses and signals an
//                 mbarrier with the bytes that arrived; the other threads issue no loads at all.
//
// All three are compiled with __launch_bounds__(256, 2): at most 128 registers per thread, two blocks
// per SM. Left free, nvcc gives the two versions that compute load addresses more registers than the TMA
// version (which computes none) and the occupancy would differ; with the same cap the loads are the only
// difference. `make -C ch1 smem_prefetch_demo` prints registers and spills per kernel (-Xptxas -v).
//
// Needs M and N multiples of 128 and K a multiple of 16 (the callers check).
// No torch dependency: CI compiles it with plain nvcc.
#pragma once
#include <cuda.h>  // CUtensorMap (the type only; the encoder is fetched through the runtime)
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <cstdint>

namespace smem_prefetch {

constexpr int BM = 128, BN = 128, BK = 16, THREADS = 256;
constexpr int STAGE_BYTES = (BM * BK + BK * BN) * 4;  // one slice of A and one of B: 16 KiB

// ---- the part every version shares: one 16-wide slice of K from shared memory into the accumulators
__device__ __forceinline__ void fma_slice(const float (*As)[BK], const float (*Bs)[BN], float (&acc)[8][8], int tx,
                                          int ty) {
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    float a[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = As[ty + 16 * i][k];  // a warp reads 2 rows: 2 addresses, no bank conflict
    const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][4 * tx]);
    const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][4 * tx + 64]);
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

__device__ __forceinline__ void store_tile(float* __restrict__ C, const float (&acc)[8][8], int N, int row0,
                                           int col0, int tx, int ty) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float* c = C + (size_t)(row0 + ty + 16 * i) * N + col0 + 4 * tx;
    *reinterpret_cast<float4*>(c) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

// Which float4 of the A slice (128 rows x 4 float4) and of the B slice (16 rows x 32 float4) thread t
// moves: float4 number t and t + 256 of each, so a warp touches consecutive 16-byte pieces.
__device__ __forceinline__ const float* a_src(const float* A, int K, int row0, int k0, int f) {
  return A + (size_t)(row0 + (f >> 2)) * K + k0 + 4 * (f & 3);
}
__device__ __forceinline__ const float* b_src(const float* B, int N, int col0, int k0, int f) {
  return B + (size_t)(k0 + (f >> 5)) * N + col0 + 4 * (f & 31);
}

// ---- version 1: synchronous loads -------------------------------------------------------------------
__global__ void __launch_bounds__(THREADS, 2) sgemm_sync(const float* __restrict__ A, const float* __restrict__ B,
                                                      float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[BM][BK];
  __shared__ __align__(16) float Bs[BK][BN];
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int f = t + p * THREADS;
      *reinterpret_cast<float4*>(&As[f >> 2][4 * (f & 3)]) = *reinterpret_cast<const float4*>(a_src(A, K, row0, k0, f));
      *reinterpret_cast<float4*>(&Bs[f >> 5][4 * (f & 31)]) = *reinterpret_cast<const float4*>(b_src(B, N, col0, k0, f));
    }
    __syncthreads();  // the slice is in shared memory
    fma_slice(As, Bs, acc, tx, ty);
    __syncthreads();  // everyone is done reading it before it is overwritten
  }
  store_tile(C, acc, N, row0, col0, tx, ty);
}

// ---- version 2: cp.async double buffering (sm_80+) ---------------------------------------------------
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");  // .cg: bypass L1
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {  // wait until at most PENDING committed groups are in flight
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
}

__global__ void __launch_bounds__(THREADS, 2) sgemm_cp_async(const float* __restrict__ A, const float* __restrict__ B,
                                                          float* __restrict__ C, int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async needs sm_80; the host launcher refuses older GPUs
#else
  __shared__ __align__(16) float As[2][BM][BK];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int slices = K / BK;
  auto issue = [&](int slice, int buf) {
    const int k0 = slice * BK;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int f = t + p * THREADS;
      cp_async16(&As[buf][f >> 2][4 * (f & 3)], a_src(A, K, row0, k0, f));
      cp_async16(&Bs[buf][f >> 5][4 * (f & 31)], b_src(B, N, col0, k0, f));
    }
  };
  float acc[8][8] = {};
  issue(0, 0);
  cp_async_commit();
  for (int s = 0; s < slices; ++s) {
    if (s + 1 < slices) issue(s + 1, (s + 1) & 1);  // the next slice flies while this one is computed
    cp_async_commit();                               // (an empty group on the last slice keeps the count uniform)
    cp_async_wait<1>();                              // this thread's copies of slice s have landed ...
    __syncthreads();                                 // ... and everyone else's
    fma_slice(As[s & 1], Bs[s & 1], acc, tx, ty);
    __syncthreads();  // buffer s&1 is refilled by the next iteration's issue(s + 2)
  }
  store_tile(C, acc, N, row0, col0, tx, ty);
#endif
}

// ---- version 3: TMA double buffering (sm_90+) --------------------------------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
#endif
}
// One arrival that also says how many bytes the phase must still receive from the copy engine.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}
// Copy the box at (c0 = column, c1 = row) of a 2-D tensor map into shared memory; completion is
// counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* smem, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(smem_addr(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
#endif
}

// Thread 0 only: arm the barrier with the slice's byte count, then start both copies.
__device__ __forceinline__ void tma_issue_slice(const CUtensorMap* mapA, const CUtensorMap* mapB, float (*As)[BK],
                                                float (*Bs)[BN], uint64_t* bar, int k0, int row0, int col0) {
  mbar_arrive_expect_tx(bar, STAGE_BYTES);
  tma_load_2d(As, mapA, bar, k0, row0);
  tma_load_2d(Bs, mapB, bar, col0, k0);
}

// mapA describes A (K columns x M rows) in 16 x 128 boxes, mapB describes B (N x K) in 128 x 16 boxes:
// each box lands in shared memory as a dense As[128][16] or Bs[16][128], the layout versions 1-2 use.
__global__ void __launch_bounds__(THREADS, 2) sgemm_tma(const __grid_constant__ CUtensorMap mapA,
                                                     const __grid_constant__ CUtensorMap mapB, float* __restrict__ C,
                                                     int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // TMA needs sm_90; the host launcher refuses older GPUs
#else
  __shared__ __align__(128) float As[2][BM][BK];
  __shared__ __align__(128) float Bs[2][BK][BN];
  __shared__ __align__(8) uint64_t full[2];  // full[b] completes a phase when buffer b holds its slice
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int slices = K / BK;
  if (t == 0) {
    mbar_init(&full[0], 1);
    mbar_init(&full[1], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // barrier init visible to the copy engine
  }
  __syncthreads();
  float acc[8][8] = {};
  if (t == 0) tma_issue_slice(&mapA, &mapB, As[0], Bs[0], &full[0], 0, row0, col0);
  for (int s = 0; s < slices; ++s) {
    if (t == 0 && s + 1 < slices)  // buffer (s+1)&1 was released by the last __syncthreads
      tma_issue_slice(&mapA, &mapB, As[(s + 1) & 1], Bs[(s + 1) & 1], &full[(s + 1) & 1], (s + 1) * BK, row0, col0);
    mbar_wait(&full[s & 1], (s >> 1) & 1);  // the n-th use of a buffer waits for its barrier's n-th phase
    fma_slice(As[s & 1], Bs[s & 1], acc, tx, ty);
    __syncthreads();  // everyone is done reading buffer s&1 before thread 0 refills it
  }
  store_tile(C, acc, N, row0, col0, tx, ty);
#endif
}

// ---- host side ---------------------------------------------------------------------------------------
inline int device_major() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return 0;
  return major;
}
inline bool cp_async_supported() { return device_major() >= 8; }
inline bool tma_supported() { return device_major() >= 9; }

// A row-major rows x cols fp32 matrix as a 2-D tensor map with box_cols x box_rows boxes. The driver's
// encoder is fetched through the runtime, so nothing links against libcuda.
inline cudaError_t encode_tensor_map(CUtensorMap* map, const float* base, int rows, int cols, int box_rows,
                                     int box_cols) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (!encode) {
    cudaDriverEntryPointQueryResult found;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                                     cudaEnableDefault, &found);
    if (e != cudaSuccess) return e;
    if (found != cudaDriverEntryPointSuccess || !encode) return cudaErrorNotSupported;
  }
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};  // innermost first
  const cuuint64_t strides[1] = {(cuuint64_t)cols * sizeof(float)};  // bytes between rows
  const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(base), dims, strides, box,
                      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

enum Version { SYNC = 0, CP_ASYNC = 1, TMA = 2 };

// The tensor maps hold A's and B's addresses and are encoded on every call (a host-only step of
// well under a microsecond), so a call always reads the buffers it is given.
inline cudaError_t launch_sgemm(int version, const float* A, const float* B, float* C, int M, int N, int K,
                                cudaStream_t stream) {
  if (M % BM || N % BN || K % BK || M <= 0 || N <= 0 || K <= 0) return cudaErrorInvalidValue;
  const dim3 grid(N / BN, M / BM);
  switch (version) {
    case SYNC:
      sgemm_sync<<<grid, THREADS, 0, stream>>>(A, B, C, M, N, K);
      break;
    case CP_ASYNC:
      if (!cp_async_supported()) return cudaErrorNotSupported;
      sgemm_cp_async<<<grid, THREADS, 0, stream>>>(A, B, C, M, N, K);
      break;
    case TMA: {
      if (!tma_supported()) return cudaErrorNotSupported;
      CUtensorMap mapA, mapB;
      cudaError_t e = encode_tensor_map(&mapA, A, M, K, BM, BK);
      if (e == cudaSuccess) e = encode_tensor_map(&mapB, B, K, N, BK, BN);
      if (e != cudaSuccess) return e;
      sgemm_tma<<<grid, THREADS, 0, stream>>>(mapA, mapB, C, M, N, K);
      break;
    }
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

inline const void* sgemm_kernel(int version) {
  switch (version) {
    case SYNC: return (const void*)sgemm_sync;
    case CP_ASYNC: return (const void*)sgemm_cp_async;
    case TMA: return (const void*)sgemm_tma;
    default: return nullptr;
  }
}

}  // namespace smem_prefetch
