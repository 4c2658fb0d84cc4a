// bottlenecks.cuh: three fine-grained bottlenecks and their fixes, each a pair of kernels that compute the
// same result. Shared by the pairs' extension (bottlenecks.cu) and the standalone sample (bottlenecks_demo.cu).
//
//   transpose_smem<PAD>   32x32 tile through shared memory. PAD=0: the column read tile[tx][ty+j] hits
//                         one bank 32 times (32-way bank conflict); PAD=1: a 33-float row stride spreads
//                         the column over 32 banks. ncu: l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
//   histogram_global      every byte an atomicAdd on one of 256 global bins: all SMs contend in L2 for
//                         the same 256 addresses. ncu: lts__t_requests_op_red.sum (one per element)
//   histogram_private     bins in shared memory per block, merged once per block with 256 global atomics.
//   mix<MINB>             each thread keeps a row of 32 floats live across 8 rounds of neighbour mixing.
//                         MINB=8 asks for 8 blocks of 256 threads per SM: 32 registers per thread, too few,
//                         so the compiler spills to local memory; MINB=1 leaves it the registers it needs.
//                         ncu: l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum; ptxas -v prints the spill bytes.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

constexpr int TILE = 32, TILE_ROWS = 8, BINS = 256, MIX_WIDTH = 32, MIX_ROUNDS = 8, MIX_THREADS = 256;

template <int PAD>
__global__ void transpose_smem(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + PAD];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += TILE_ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(int64_t)(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += TILE_ROWS)  // a warp reads a column of the tile: the bank conflict, unless PAD
    if (x < rows && y + j < cols) out[(int64_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void histogram_global(const uint8_t* __restrict__ x, int64_t n, unsigned int* __restrict__ hist) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    atomicAdd(&hist[x[i]], 1u);
}

__global__ void histogram_private(const uint8_t* __restrict__ x, int64_t n, unsigned int* __restrict__ hist) {
  __shared__ unsigned int local[BINS];
  for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    atomicAdd(&local[x[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < BINS; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], local[b]);
}

template <int MINB>
__global__ void __launch_bounds__(MIX_THREADS, MINB)
mix(const float* __restrict__ x, float* __restrict__ y, int64_t rows) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float v[MIX_WIDTH], t[MIX_WIDTH];
#pragma unroll
  for (int k = 0; k < MIX_WIDTH; ++k) v[k] = x[r * MIX_WIDTH + k];
#pragma unroll
  for (int round = 0; round < MIX_ROUNDS; ++round) {
#pragma unroll
    for (int k = 0; k < MIX_WIDTH; ++k)
      t[k] = 0.5f * v[k] + 0.25f * (v[(k + 1) % MIX_WIDTH] + v[(k + MIX_WIDTH - 1) % MIX_WIDTH]) + 0.01f * v[k] * v[k];
#pragma unroll
    for (int k = 0; k < MIX_WIDTH; ++k) v[k] = t[k];
  }
#pragma unroll
  for (int k = 0; k < MIX_WIDTH; ++k) y[r * MIX_WIDTH + k] = v[k];
}

// launchers, shared by the extension and the sample
inline void launch_transpose(bool padded, const float* in, float* out, int rows, int cols, cudaStream_t s) {
  dim3 block(TILE, TILE_ROWS), grid((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
  if (padded) transpose_smem<1><<<grid, block, 0, s>>>(in, out, rows, cols);
  else transpose_smem<0><<<grid, block, 0, s>>>(in, out, rows, cols);
}

inline void launch_histogram(bool privatized, const uint8_t* x, int64_t n, unsigned int* hist, int sms, cudaStream_t s) {
  cudaMemsetAsync(hist, 0, BINS * sizeof(unsigned int), s);
  int blocks = sms * 8;  // grid-stride: 8 blocks of 256 per SM, each reading many elements
  if (privatized) histogram_private<<<blocks, 256, 0, s>>>(x, n, hist);
  else histogram_global<<<blocks, 256, 0, s>>>(x, n, hist);
}

inline void launch_mix(bool spills, const float* x, float* y, int64_t rows, cudaStream_t s) {
  int blocks = (int)((rows + MIX_THREADS - 1) / MIX_THREADS);
  if (spills) mix<8><<<blocks, MIX_THREADS, 0, s>>>(x, y, rows);
  else mix<1><<<blocks, MIX_THREADS, 0, s>>>(x, y, rows);
}
