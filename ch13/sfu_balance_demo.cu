// sfu_balance_demo.cu: one pipe saturated while another idles, and the same work split between them.
//
// A kernel that is nothing but 2^x (the exponentials of a softmax, with the surrounding arithmetic stripped
// away): each thread sums 2^x over 4098 values of x made in registers. An H100 SM has two ways to compute it:
//
//   MUFU.EX2     the special-function unit (SFU, the "XU" pipe): one instruction, 16 results per clock per SM
//   polynomial   on the FMA and integer pipes: 2^x = 2^i * p(f), i = round(x) by adding 1.5 * 2^23,
//                f = x - i in [-0.5, 0.5], p a degree-6 polynomial (6 FMAs), 2^i added into the exponent bits:
//                about 10 instructions, each one of the 128 thread-instructions an SM issues per clock
//
//   1. all MUFU          every value through ex2.approx: the SFU is the limit (1/16 of a clock per value per SM)
//                        and the issue slots are mostly idle
//   2. all polynomial    every value on the FMA pipes: the issue slots are the limit and the SFU idles
//   3. 2 MUFU : 1 poly   of every 3 values, 2 through the SFU and 1 through the polynomial: both pipes busy
//
// Predict, then measure: Nsight Compute's instruction counts (IPC x cycles) give about 3.3 instructions a value
// in version 1 (the MUFU, the sum, the next x) and 12.3 in version 2. The 2:1 split then needs about
// 2/3 x 1 + 1/3 x 10 + 2.3 = 6.3 issue slots a value, 0.049 of a clock per SM, against the SFU's 2/3 x 1/16 =
// 0.042: the issue slots stay the limit, and the prediction over version 1 is 0.0625 / 0.049 = 1.27x.
//
// Build: make -C ch13 sfu_balance_demo
// Prints, per version: ms, Gexp/s and speedup over version 1; exits 1 if any version's sum in any thread differs
// from a double reference by more than 1e-5 relative (4098 terms summed in fp32; measured: 2.1e-6), or is NaN. Nsight Compute shows each pipe's share: scripts/h100_topics.sh runs it
// (sm__inst_executed_pipe_xu for the SFU, sm__pipe_fma_cycles_active for the FMA pipes).
// Built with -DINJECT_FAULT, the polynomial's ln 2 is off by 1% (every polynomial value wrong by up to 0.35%),
// and the run must say MISMATCH.
// Bound: issue (one pipe or the other), not memory: each thread reads nothing and writes one float.
#include <cstdint>
#include <functional>

#include "cuda_check.cuh"

constexpr int THREADS = 256;
constexpr int BLOCKS_PER_SM = 16;  // blocks of work per SM: 8 are resident at a time (2048 threads), two full waves
constexpr int VALUES = 4096;       // 2^x per thread
constexpr float STEP = 1.0f / 1024.0f;

__device__ __forceinline__ float exp2_mufu(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA and integer pipes only (no conversion instruction: F2I would go to the SFU's pipe).
__device__ __forceinline__ float exp2_poly(float x) {
  const float magic = 12582912.0f;          // 1.5 * 2^23: adding it rounds x to an integer in the low bits
  float t = x + magic;
  float i = t - magic;                      // round(x)
  float f = x - i;                          // in [-0.5, 0.5]
  // 2^f = e^(f ln 2), Taylor to degree 6: error under 2e-7 relative on [-0.5, 0.5]
#ifdef INJECT_FAULT
  const float c1 = 1.01f * 6.9314718055994531e-1f;   // the negative control: ln 2 off by 1%
#else
  const float c1 = 6.9314718055994531e-1f;           // ln 2
#endif
  float p = 1.5403530393381609e-4f;                  // (ln 2)^6 / 6!
  p = fmaf(p, f, 1.3333558146428443e-3f);
  p = fmaf(p, f, 9.6181291076284772e-3f);
  p = fmaf(p, f, 5.5504108664821580e-2f);
  p = fmaf(p, f, 2.4022650695910071e-1f);
  p = fmaf(p, f, c1);
  p = fmaf(p, f, 1.0f);
  int e = __float_as_int(t) - 0x4B400000;   // the integer round(x), from t's low mantissa bits
  return __int_as_float(__float_as_int(p) + (e << 23));
}

// MUFU_OF_3: how many of every 3 values go through the SFU (3, 0 or 2).
template <int MUFU_OF_3>
__global__ void sum_exp2(float* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float a = -8.0f + (t % 1024) * STEP;      // x from [-8, -7) up by STEP: below -3, exact in fp32, no denormals
  float sum = 0.0f;
#pragma unroll 4
  for (int j = 0; j < VALUES; j += 3) {     // x kept in a float: an int-to-float conversion would use the SFU's pipe
    float b = a + STEP, c = b + STEP;
    sum += MUFU_OF_3 >= 1 ? exp2_mufu(a) : exp2_poly(a);
    sum += MUFU_OF_3 >= 2 ? exp2_mufu(b) : exp2_poly(b);
    sum += MUFU_OF_3 >= 3 ? exp2_mufu(c) : exp2_poly(c);
    a = c + STEP;
  }
  out[t] = sum;
}

int main() {
  print_device();
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int blocks = sms * BLOCKS_PER_SM;
  const int n = blocks * THREADS;
  const int per_thread = (VALUES + 2) / 3 * 3;   // the loop's values, three at a time
  float* out;
  CUDA_CHECK(cudaMalloc(&out, n * sizeof(float)));
  // The double reference: one per distinct x0 (the thread index mod 1024).
  std::vector<double> ref(1024);
  for (int r = 0; r < 1024; ++r) {
    double s = 0.0;
    float a = -8.0f + r * STEP;             // the kernel's x, step by step (every one exact in fp32)
    for (int j = 0; j < VALUES; j += 3) {
      float b = a + STEP, c = b + STEP;
      s += std::exp2((double)a) + std::exp2((double)b) + std::exp2((double)c);
      a = c + STEP;
    }
    ref[r] = s;
  }
  struct Version { const char* name; std::function<void()> run; };
  const Version versions[] = {{"1. all MUFU", [&] { sum_exp2<3><<<blocks, THREADS>>>(out); }},
                              {"2. all polynomial", [&] { sum_exp2<0><<<blocks, THREADS>>>(out); }},
                              {"3. 2 MUFU : 1 polynomial", [&] { sum_exp2<2><<<blocks, THREADS>>>(out); }}};
  bool ok = true;
  std::vector<float> got(n);
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(out, 0xFF, n * sizeof(float)));  // NaNs: an unwritten sum fails
    v.run();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    size_t bad = 0;  // sums over the tolerance, NaN included (a NaN fails every comparison, so it is counted)
    for (int t = 0; t < n; ++t) {
      double e = std::fabs(got[t] - ref[t % 1024]) / ref[t % 1024];
      if (!(e <= 1e-5)) ++bad;
      if (e > worst) worst = e;
    }
    bool pass = bad == 0;
    std::printf("check %-26s worst rel. error %.1e, %zu sums over 1e-5 or NaN  %s\n", v.name, worst, bad,
                pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }
  const double exps = (double)n * per_thread;
  std::printf("\n%-26s %9s %9s %9s\n", "version", "ms", "Gexp/s", "speedup");
  float first_ms = 0.0f;
  for (const auto& v : versions) {
    float ms = median_ms(v.run, 5, 30, false);  // no memory traffic to scrub
    if (first_ms == 0.0f) first_ms = ms;
    std::printf("%-26s %9.3f %9.1f %8.2fx\n", v.name, ms, exps / (ms * 1e-3) / 1e9, first_ms / ms);
  }
  CUDA_CHECK(cudaFree(out));
  std::printf("PASS\n");
  return 0;
}
