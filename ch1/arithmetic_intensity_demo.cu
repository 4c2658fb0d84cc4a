// arithmetic_intensity_demo.cu: the same elementwise math, y = (a*x + b)^2, five ways.
//
//   1. baseline     three kernels (scale, shift, square), one float per thread:
//                   6 passes over memory (3 reads + 3 writes), 3 FLOPs per element
//   2. unrolled     the same three kernels, 4 floats per thread in an unrolled loop
//   3. vectorized   the same three kernels, one float4 (16-byte) load/store per thread
//   4. more FLOPs   one kernel that evaluates a degree-16 polynomial per element: 16 steps of
//                   r = r*x*0.5 + 1, 3 FLOPs each, 48 FLOPs for the same 8 bytes (6 FLOP/byte, 16x the
//                   3 FLOPs of version 5; a different function, verified against its own reference)
//   5. fused        one kernel, float4, (a*x + b)^2 in registers: 2 passes instead of 6
//
// All five are memory-bound on any GPU (arithmetic intensity well under the ridge point),
// so time follows bytes moved: fusing cuts bytes 3x, which is the whole speedup; versions
// 2 and 3 only help each pass get closer to the bandwidth ceiling, and version 4 shows
// that extra FLOPs are free until the ridge.
//
// Build: make -C ch1   Prints: ms, GB/s, FLOP/byte, % of measured copy bandwidth per version,
// and the fused speedup; exits 1 on a mismatch.
#include <functional>

#include "cuda_check.cuh"

constexpr size_t N = (size_t)64 << 20;  // 64M floats, 256 MB per array
constexpr float A = 1.0009765625f, B = -0.25f;
constexpr int POLY = 16;

__global__ void scale(const float* x, float* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = A * x[i];
}
__global__ void shift(const float* x, float* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + B;
}
__global__ void square(const float* x, float* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}

// Version 2: each thread handles 4 elements spaced a block apart (stays coalesced), loop unrolled
// so four independent loads are in flight before the first use.
template <int OP>
__global__ void unrolled(const float* x, float* y, size_t n) {
  size_t base = blockIdx.x * (size_t)blockDim.x * 4 + threadIdx.x;
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    size_t i = base + k * blockDim.x;
    v[k] = i < n ? x[i] : 0.f;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    size_t i = base + k * blockDim.x;
    float r = OP == 0 ? A * v[k] : OP == 1 ? v[k] + B : v[k] * v[k];
    if (i < n) y[i] = r;
  }
}

// Version 3: 16-byte accesses. N is a multiple of 4 and cudaMalloc aligns to 256 bytes.
template <int OP>
__global__ void vectorized(const float4* x, float4* y, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  float* f = reinterpret_cast<float*>(&v);
#pragma unroll
  for (int k = 0; k < 4; ++k) f[k] = OP == 0 ? A * f[k] : OP == 1 ? f[k] + B : f[k] * f[k];
  y[i] = v;
}

__host__ __device__ inline float poly(float x) {  // 3 FLOPs per degree: two multiplies and an add
  float r = 1.0f;
  for (int d = 0; d < POLY; ++d) r = r * x * 0.5f + 1.0f;  // x*0.5 keeps values bounded on [-1, 1)
  return r;
}
__global__ void more_flops(const float4* x, float4* y, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  y[i] = make_float4(poly(v.x), poly(v.y), poly(v.z), poly(v.w));
}

__global__ void fused(const float4* x, float4* y, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  auto f = [](float t) { t = A * t + B; return t * t; };
  y[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
}

int main() {
  print_device();
  const double peak = measured_copy_gbps();
  std::printf("measured copy bandwidth: %.0f GB/s (read + write)\n\n", peak);
  std::vector<float> hx(N), out(N), ref(N), ref_poly(N);
  fill_random(hx, 7);
  for (size_t i = 0; i < N; ++i) {
    float t = A * hx[i];  // same rounding steps as the kernels: scale, then shift, then square
    t = t + B;
    ref[i] = t * t;
    ref_poly[i] = poly(hx[i]);
  }
  float *x, *t, *y;
  CUDA_CHECK(cudaMalloc(&x, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&t, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, N * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(x, hx.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  const int T = 256;
  const unsigned g1 = (unsigned)((N + T - 1) / T), g4 = (unsigned)((N / 4 + T - 1) / T);
  auto f4 = [](float* p) { return reinterpret_cast<float4*>(p); };

  struct Version {
    const char* name;
    std::function<void()> run;
    double bytes, flops;
    const std::vector<float>* expect;
  };
  const double fb = sizeof(float) * (double)N;
  Version versions[] = {
      {"1 baseline (3 kernels)", [&] {
         scale<<<g1, T>>>(x, t, N); shift<<<g1, T>>>(t, t, N); square<<<g1, T>>>(t, y, N); CUDA_CHECK_LAUNCH();
       }, 6 * fb, 3.0 * N, &ref},
      {"2 unrolled x4 (3 kernels)", [&] {
         unsigned g = (unsigned)((N + 4 * T - 1) / (4 * T));
         unrolled<0><<<g, T>>>(x, t, N); unrolled<1><<<g, T>>>(t, t, N); unrolled<2><<<g, T>>>(t, y, N);
         CUDA_CHECK_LAUNCH();
       }, 6 * fb, 3.0 * N, &ref},
      {"3 float4 (3 kernels)", [&] {
         vectorized<0><<<g4, T>>>(f4(x), f4(t), N / 4); vectorized<1><<<g4, T>>>(f4(t), f4(t), N / 4);
         vectorized<2><<<g4, T>>>(f4(t), f4(y), N / 4); CUDA_CHECK_LAUNCH();
       }, 6 * fb, 3.0 * N, &ref},
      {"4 degree-16 polynomial", [&] { more_flops<<<g4, T>>>(f4(x), f4(y), N / 4); CUDA_CHECK_LAUNCH(); },
       2 * fb, 3.0 * POLY * N, &ref_poly},
      {"5 fused float4 (1 kernel)", [&] { fused<<<g4, T>>>(f4(x), f4(y), N / 4); CUDA_CHECK_LAUNCH(); },
       2 * fb, 3.0 * N, &ref},
  };

  bool ok = true;
  for (auto& v : versions) {
    CUDA_CHECK(cudaMemset(y, 0xFF, N * sizeof(float)));  // NaN poison
    v.run();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(out.data(), y, N * sizeof(float), cudaMemcpyDeviceToHost));
    double err = rel_error(out.data(), v.expect->data(), N);
    bool pass = err < 1e-6;  // same operations in the same order: only FMA contraction may differ
    std::printf("verify %-28s rel err %.2e %s\n", v.name, err, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  std::printf("\n%-28s %9s %9s %10s %11s %8s\n", "version (64M floats)", "ms", "GB/s", "FLOP/byte", "% of copy", "GFLOP/s");
  float base = 0.f, last = 0.f;
  for (auto& v : versions) {
    float ms = median_ms(v.run, 3, 30, true);
    if (base == 0.f) base = ms;
    last = ms;
    double gbps = v.bytes / (ms * 1e-3) / 1e9;
    std::printf("%-28s %9.3f %9.0f %10.3f %10.1f%% %8.0f\n", v.name, ms, gbps, v.flops / v.bytes,
                100.0 * gbps / peak, v.flops / (ms * 1e-3) / 1e9);
  }
  std::printf("\nfused vs baseline: %.2fx faster\n", base / last);
  for (void* p : {(void*)x, (void*)t, (void*)y}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
