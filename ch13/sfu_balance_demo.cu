// sfu_balance_demo.cu: one pipe saturated while another idles, and the same work split between them.
//
// A kernel that is nothing but 2^x (the exponentials of a softmax, with the surrounding arithmetic stripped
// away): each thread sums 2^x over 4098 values of x made in registers. An H100 SM has two ways to compute it:
//
//   MUFU.EX2     the special-function unit (SFU, the "XU" pipe): one instruction, 16 results per clock per SM
//   polynomial   on the FMA and integer pipes: 2^x = 2^i * p(f), i = round(x) by adding 1.5 * 2^23,
//                f = x - i in [-0.5, 0.5], p a degree-6 polynomial (6 FMAs), 2^i added into the exponent bits:
//                about 12 instructions, each one of the 128 thread-instructions an SM issues per clock
//
//   1. all MUFU          every value through ex2.approx: the SFU is the limit (1/16 of a clock per value per
//                        SM), and the issue slots are mostly idle (~2.3 instructions a value: the MUFU, the sum
//                        and the next x)
//   2. all polynomial    every value on the FMA pipes: ~14 instructions a value, 14/128 of a clock: the issue
//                        slots are the limit and the SFU idles; slower than 1
//   3. 2 MUFU : 1 poly   of every 3 values, 2 through the SFU and 1 through the polynomial: 6 instructions a value
//                        (6/128 = 0.047 of a clock) against the SFU's 2/3 x 1/16 = 0.042: both near their limit,
//                        predicted 1.33x over version 1 (the best split, 70% MUFU, would give 1.42x). This is
//                        what FlashAttention-4 does on Blackwell, for the same reason
//
// Build: make -C ch13 sfu_balance_demo
// Prints, per version: ms, Gexp/s and speedup over version 1; exits 1 if any version's sums differ from a double
// reference by more than 1e-4 relative (4098 terms summed in fp32). Nsight Compute shows each pipe's share: scripts/h100_topics.sh runs it
// (sm__inst_executed_pipe_xu for the SFU, sm__pipe_fma_cycles_active for the FMA pipes).
// Built with -DINJECT_FAULT, the polynomial's ln 2 is off by 1%, and the run must say MISMATCH.
// Bound: issue (one pipe or the other), not memory: each thread reads nothing and writes one float.
#include <cstdint>
#include <functional>

#include "cuda_check.cuh"

constexpr int THREADS = 256;
constexpr int BLOCKS = 132 * 16;   // 16 blocks a SM on an H100: every SM full for the whole run
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
  const int n = BLOCKS * THREADS;
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
  const Version versions[] = {{"1. all MUFU", [&] { sum_exp2<3><<<BLOCKS, THREADS>>>(out); }},
                              {"2. all polynomial", [&] { sum_exp2<0><<<BLOCKS, THREADS>>>(out); }},
                              {"3. 2 MUFU : 1 polynomial", [&] { sum_exp2<2><<<BLOCKS, THREADS>>>(out); }}};
  bool ok = true;
  std::vector<float> got(n);
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(out, 0xFF, n * sizeof(float)));  // NaNs: an unwritten sum fails
    v.run();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int t = 0; t < n; ++t) worst = std::max(worst, std::fabs(got[t] - ref[t % 1024]) / ref[t % 1024]);
    bool pass = worst < 1e-4;  // 4098 fp32 additions; NaN fails: the comparison is false
    std::printf("check %-26s worst rel. error %.1e  %s\n", v.name, worst, pass ? "ok" : "MISMATCH");
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
