// alloc_kernels.cu: kernels and host code for the stream_alloc pair (ch11/baseline_stream_alloc.py),
// built as a PyTorch extension with alloc_kernels_binding.cpp.
//
// One step makes K scratch buffers in turn: allocate, fill (tmp = x * (j+1)), accumulate
// (out += tmp), free. Two ways to get the scratch memory:
//   step_malloc        cudaMalloc / cudaFree: cudaFree waits for the whole device to go idle,
//                      so the CPU stalls K times per step and the GPU drains K times
//   step_malloc_async  cudaMallocAsync / cudaFreeAsync on the caller's stream: allocation is an
//                      operation in the stream's order, served from a pool that keeps freed
//                      memory (release threshold raised once), so nothing waits
// No torch dependency: CI compiles this file with plain nvcc.
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>

namespace {

__global__ void fill_scaled(const float* __restrict__ x, float* __restrict__ tmp, float s, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) tmp[i] = x[i] * s;
}

__global__ void accumulate(const float* __restrict__ tmp, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] += tmp[i];
}

void launch_pair(const float* x, float* tmp, float* out, float s, int64_t n, cudaStream_t st) {
  const int T = 256;
  unsigned blocks = (unsigned)((n + T - 1) / T);
  fill_scaled<<<blocks, T, 0, st>>>(x, tmp, s, n);
  accumulate<<<blocks, T, 0, st>>>(tmp, out, n);
}

}  // namespace

// Returns a CUDA error code (0 on success) so the binding can raise with its name.
int step_malloc(const float* x, float* out, int64_t n, int k, cudaStream_t st) {
  for (int j = 0; j < k; ++j) {
    float* tmp = nullptr;
    cudaError_t e = cudaMalloc(&tmp, n * sizeof(float));
    if (e != cudaSuccess) return (int)e;
    launch_pair(x, tmp, out, (float)(j + 1), n, st);
    if ((e = cudaGetLastError()) != cudaSuccess) { cudaFree(tmp); return (int)e; }  // the launch's error
    if ((e = cudaFree(tmp)) != cudaSuccess) return (int)e;  // implicit device-wide synchronization
  }
  return 0;
}

int step_malloc_async(const float* x, float* out, int64_t n, int k, cudaStream_t st) {
  static bool pool_ready = false;
  cudaError_t e;
  if (!pool_ready) {  // keep freed blocks in the pool instead of returning them to the driver at each sync
    int dev = 0;
    cudaMemPool_t pool;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return (int)e;
    if ((e = cudaDeviceGetDefaultMemPool(&pool, dev)) != cudaSuccess) return (int)e;
    uint64_t keep = UINT64_MAX;
    if ((e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess) return (int)e;
    pool_ready = true;
  }
  for (int j = 0; j < k; ++j) {
    float* tmp = nullptr;
    if ((e = cudaMallocAsync(&tmp, n * sizeof(float), st)) != cudaSuccess) return (int)e;
    launch_pair(x, tmp, out, (float)(j + 1), n, st);
    if ((e = cudaGetLastError()) != cudaSuccess) { cudaFreeAsync(tmp, st); return (int)e; }
    if ((e = cudaFreeAsync(tmp, st)) != cudaSuccess) return (int)e;  // ordered after the kernels that use it
  }
  return 0;
}
