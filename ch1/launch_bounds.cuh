// launch_bounds.cuh: batched 8x8 linear solves, one system per thread, compiled four ways.
// Shared by the launch_bounds pair's extension (launch_bounds.cu) and the sample
// (launch_bounds_demo.cu), so both time exactly the same kernels.
//
// Each thread loads its 8x8 matrix and right-hand side into registers (72 floats), eliminates
// without pivoting (the systems are diagonally dominant) and back-substitutes: real register
// pressure, the kind a per-thread small-matrix kernel (Kalman filters, physics constraints,
// per-pixel least squares) has. Compiled freely, nvcc keeps all 72 values and their addresses in
// registers (159 per thread with CUDA 13.0 for sm_90), so only one 256-thread block fits in an
// SM's 64K registers: 8 warps of 64, 12.5% occupancy. __launch_bounds__(256, B) asks for B
// resident blocks, which caps registers at 65536 / (256 * B) per thread (2: 128, 4: 64, 8: 32);
// whatever does not fit is spilled to local memory. `nvcc -Xptxas -v` shows both numbers.
//
// Layout: struct of arrays. Entry (i, j) of system m is A[(i*8 + j) * M + m] and b[i * M + m],
// so for every entry a warp reads 32 consecutive floats (coalesced).
// No torch dependency: CI compiles it with plain nvcc.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace launch_bounds {

constexpr int S = 8;          // system size
constexpr int THREADS = 256;  // threads per block for every version

// Useful work per system: elimination sum_{n=0..7} (1 + n * (1 + 2n + 2)) = 372 FLOPs (a division
// counted as one), back substitution 2 * 28 + 8 = 64: 436 FLOPs; 320 bytes (A, b in; x out).
constexpr double FLOPS_PER_SYSTEM = 436.0;
constexpr double BYTES_PER_SYSTEM = (S * S + 2 * S) * 4.0;

__device__ __forceinline__ void solve_one(const float* __restrict__ A, const float* __restrict__ b,
                                          float* __restrict__ x, int64_t M) {
  float a[S][S], r[S];
#pragma unroll
  for (int i = 0; i < S; ++i) {
#pragma unroll
    for (int j = 0; j < S; ++j) a[i][j] = A[(i * S + j) * M];
    r[i] = b[i * M];
  }
#pragma unroll
  for (int k = 0; k < S; ++k) {  // forward elimination
    const float inv = 1.0f / a[k][k];
#pragma unroll
    for (int i = k + 1; i < S; ++i) {
      const float f = a[i][k] * inv;
#pragma unroll
      for (int j = k + 1; j < S; ++j) a[i][j] = fmaf(-f, a[k][j], a[i][j]);
      r[i] = fmaf(-f, r[k], r[i]);
    }
  }
#pragma unroll
  for (int i = S - 1; i >= 0; --i) {  // back substitution
    float s = r[i];
#pragma unroll
    for (int j = i + 1; j < S; ++j) s = fmaf(-a[i][j], r[j], s);
    r[i] = s / a[i][i];
  }
#pragma unroll
  for (int i = 0; i < S; ++i) x[i * M] = r[i];
}

// Version 1: no __launch_bounds__, the compiler may use up to 255 registers per thread.
__global__ void solve8_free(const float* __restrict__ A, const float* __restrict__ b, float* __restrict__ x,
                            int64_t M) {
  const int64_t m = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (m < M) solve_one(A + m, b + m, x + m, M);
}

// Versions 2-4: the same code, with at least MIN_BLOCKS blocks of 256 threads resident per SM.
template <int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    solve8_capped(const float* __restrict__ A, const float* __restrict__ b, float* __restrict__ x, int64_t M) {
  const int64_t m = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (m < M) solve_one(A + m, b + m, x + m, M);
}

// min_blocks 0 = version 1 (no bounds); 2, 4 or 8 = __launch_bounds__(256, min_blocks). nullptr otherwise.
inline const void* solve8_kernel(int min_blocks) {
  switch (min_blocks) {
    case 0: return (const void*)solve8_free;
    case 2: return (const void*)solve8_capped<2>;
    case 4: return (const void*)solve8_capped<4>;
    case 8: return (const void*)solve8_capped<8>;
    default: return nullptr;
  }
}

inline cudaError_t launch_solve8(int min_blocks, const float* A, const float* b, float* x, int64_t M,
                                 cudaStream_t stream) {
  const unsigned grid = (unsigned)((M + THREADS - 1) / THREADS);
  switch (min_blocks) {
    case 0: solve8_free<<<grid, THREADS, 0, stream>>>(A, b, x, M); break;
    case 2: solve8_capped<2><<<grid, THREADS, 0, stream>>>(A, b, x, M); break;
    case 4: solve8_capped<4><<<grid, THREADS, 0, stream>>>(A, b, x, M); break;
    case 8: solve8_capped<8><<<grid, THREADS, 0, stream>>>(A, b, x, M); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// Registers per thread, local memory (spill) bytes per thread, and resident blocks per SM for one version.
struct KernelInfo {
  int registers = 0;
  size_t local_bytes = 0;
  int blocks_per_sm = 0;
  double occupancy = 0.0;  // resident warps / maximum warps per SM (theoretical)
};

inline cudaError_t kernel_info(int min_blocks, KernelInfo* info) {
  const void* k = solve8_kernel(min_blocks);
  if (!k) return cudaErrorInvalidValue;
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, k);
  if (e != cudaSuccess) return e;
  int dev = 0, max_threads = 0;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev)) != cudaSuccess) return e;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info->blocks_per_sm, k, THREADS, 0)) != cudaSuccess) return e;
  info->registers = attr.numRegs;
  info->local_bytes = attr.localSizeBytes;
  info->occupancy = (double)info->blocks_per_sm * THREADS / max_threads;
  return cudaSuccess;
}

}  // namespace launch_bounds
