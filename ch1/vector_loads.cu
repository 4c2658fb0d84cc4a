// vector_loads.cu: kernels for the vectorization pair (ch1/baseline_vectorization.py),
// built as a PyTorch extension by common/cuda_ext.py together with vector_loads_binding.cpp.
//
// y = a * x + b over bf16 values, computed in fp32 and rounded once.
//   scale_shift_scalar   one bf16 (2 bytes) per thread per load instruction
//   scale_shift_vec16    one 16-byte load (8 bf16) per thread: 8x fewer memory instructions
// The file has no torch dependency, so CI compiles it with plain nvcc.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {

__global__ void scale_shift_scalar(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                   float a, float b, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(a * __bfloat162float(x[i]) + b);
}

__global__ void scale_shift_vec16(const uint4* __restrict__ x, uint4* __restrict__ y, float a, float b,
                                  int64_t n8) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n8) return;
  uint4 v = x[i];  // 8 bf16 in one 128-bit load
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __bfloat1622float2(h[k]);
    h[k] = __floats2bfloat162_rn(a * f.x + b, a * f.y + b);
  }
  y[i] = v;
}

}  // namespace

// Host launchers with plain pointers: the binding file passes tensors' data and the current stream.
void launch_scale_shift_scalar(const void* x, void* y, float a, float b, int64_t n, cudaStream_t s) {
  const int T = 256;
  scale_shift_scalar<<<(unsigned)((n + T - 1) / T), T, 0, s>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), a, b, n);
}

// n must be a multiple of 8 and both pointers 16-byte aligned (the binding checks).
void launch_scale_shift_vec16(const void* x, void* y, float a, float b, int64_t n, cudaStream_t s) {
  const int T = 256;
  int64_t n8 = n / 8;
  scale_shift_vec16<<<(unsigned)((n8 + T - 1) / T), T, 0, s>>>(static_cast<const uint4*>(x),
                                                               static_cast<uint4*>(y), a, b, n8);
}
