// bottlenecks_demo.cu: three fine-grained bottlenecks and their fixes, each validated against a CPU
// reference and then timed: shared-memory bank conflicts (transpose), atomic contention (histogram),
// register spills (a kernel capped at 32 registers). The kernels are bottlenecks.cuh's, which the pairs
// bank_conflicts, histogram and spills also run.
//
// Build: make -C ch13 bottlenecks_demo   (nvcc -O3 -arch=sm_90 -Xptxas -v: ptxas prints each kernel's
//        registers and spill bytes)
// Run:   ch13/bin/bottlenecks_demo_sm90
// Prints one row per version: ms, GB/s, % of the measured copy bandwidth, and PASS/FAIL; exits 1 on a mismatch,
// 2 (with one line saying so) where no CUDA GPU is present.
// The ncu metric to read for each: see bottlenecks.cuh's header, or scripts/h100_ch13.sh's ncu part.
#include <cstdio>
#include <cstdint>
#include <vector>

#include "cuda_check.cuh"
#include "bottlenecks.cuh"

static bool report(const char* name, float ms, double bytes, double copy_gbps, bool ok) {
  double gbps = bytes / (ms * 1e-3) / 1e9;
  printf("%-28s %9.3f %9.0f %7.1f%%   %s\n", name, ms, gbps, 100.0 * gbps / copy_gbps, ok ? "PASS" : "FAIL");
  return ok;
}

int main() {
  require_gpu();
  print_device();
  double copy = measured_copy_gbps();
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  printf("measured copy bandwidth: %.0f GB/s\n\n%-28s %9s %9s %8s\n", copy, "version", "ms", "GB/s", "% copy");
  bool ok = true;

  // 1. transpose, 8192 x 8192 fp32: read + write 512 MiB
  const int n = 8192;
  std::vector<float> x((size_t)n * n), ref((size_t)n * n), out((size_t)n * n);
  fill_random(x, 1);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) ref[(size_t)c * n + r] = x[(size_t)r * n + c];
  float *dx, *dy;
  CUDA_CHECK(cudaMalloc(&dx, x.size() * 4));
  CUDA_CHECK(cudaMalloc(&dy, x.size() * 4));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  for (int padded = 0; padded < 2; ++padded) {  // validate first, then time
    CUDA_CHECK(cudaMemset(dy, 0, x.size() * 4));
    launch_transpose(padded, dx, dy, n, n, 0);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(out.data(), dy, x.size() * 4, cudaMemcpyDeviceToHost));
    bool good = rel_error(out.data(), ref.data(), out.size()) == 0.0;
    float ms = median_ms([&] { launch_transpose(padded, dx, dy, n, n, 0); });
    ok &= report(padded ? "transpose, padded tile" : "transpose, 32-way conflicts", ms, 2.0 * x.size() * 4, copy, good);
  }
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));

  // 2. histogram of 256 M skewed bytes: read 256 MiB
  const int64_t m = (int64_t)256 << 20;
  std::vector<uint8_t> bytes(m);
  std::vector<unsigned int> href(BINS, 0), hout(BINS);
  unsigned s = 7;
  for (auto& b : bytes) {  // a rough bell around 128: the sum of 4 uniform bytes / 4
    int acc = 0;
    for (int k = 0; k < 4; ++k) { s = s * 1664525u + 1013904223u; acc += (s >> 24) & 0xFF; }
    b = (uint8_t)(acc / 4);
    ++href[b];
  }
  uint8_t* db;
  unsigned int* dh;
  CUDA_CHECK(cudaMalloc(&db, m));
  CUDA_CHECK(cudaMalloc(&dh, BINS * sizeof(unsigned int)));
  CUDA_CHECK(cudaMemcpy(db, bytes.data(), m, cudaMemcpyHostToDevice));
  for (int priv = 0; priv < 2; ++priv) {
    launch_histogram(priv, db, m, dh, sms, 0);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(hout.data(), dh, BINS * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    bool good = hout == href;
    float ms = median_ms([&] { launch_histogram(priv, db, m, dh, sms, 0); });
    ok &= report(priv ? "histogram, privatized bins" : "histogram, global atomics", ms, (double)m, copy, good);
  }
  CUDA_CHECK(cudaFree(db));
  CUDA_CHECK(cudaFree(dh));

  // 3. mix: 4 M rows of 32 floats, read + write 1 GiB
  const int64_t rows = (int64_t)4 << 20;
  std::vector<float> mx(rows * MIX_WIDTH), mref(rows * MIX_WIDTH), mout(rows * MIX_WIDTH);
  fill_random(mx, 3);
  for (int64_t r = 0; r < rows; ++r) {
    float v[MIX_WIDTH], t[MIX_WIDTH];
    for (int k = 0; k < MIX_WIDTH; ++k) v[k] = mx[r * MIX_WIDTH + k];
    for (int round = 0; round < MIX_ROUNDS; ++round) {
      for (int k = 0; k < MIX_WIDTH; ++k)
        t[k] = 0.5f * v[k] + 0.25f * (v[(k + 1) % MIX_WIDTH] + v[(k + MIX_WIDTH - 1) % MIX_WIDTH]) + 0.01f * v[k] * v[k];
      for (int k = 0; k < MIX_WIDTH; ++k) v[k] = t[k];
    }
    for (int k = 0; k < MIX_WIDTH; ++k) mref[r * MIX_WIDTH + k] = v[k];
  }
  float *mdx, *mdy;
  CUDA_CHECK(cudaMalloc(&mdx, mx.size() * 4));
  CUDA_CHECK(cudaMalloc(&mdy, mx.size() * 4));
  CUDA_CHECK(cudaMemcpy(mdx, mx.data(), mx.size() * 4, cudaMemcpyHostToDevice));
  for (int spills = 1; spills >= 0; --spills) {
    launch_mix(spills, mdx, mdy, rows, 0);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(mout.data(), mdy, mx.size() * 4, cudaMemcpyDeviceToHost));
    bool good = rel_error(mout.data(), mref.data(), mout.size()) < 1e-5;  // FMA contraction differs from the CPU's
    float ms = median_ms([&] { launch_mix(spills, mdx, mdy, rows, 0); });
    ok &= report(spills ? "mix, 32 registers (spills)" : "mix, 60 registers", ms, 2.0 * mx.size() * 4, copy, good);
  }
  CUDA_CHECK(cudaFree(mdx));
  CUDA_CHECK(cudaFree(mdy));
  printf("\n%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
