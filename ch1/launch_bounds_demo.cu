// launch_bounds_demo.cu: does capping registers with __launch_bounds__ pay? Batched 8x8 linear
// solves, one system per thread (kernels in launch_bounds.cuh, the same ones the launch_bounds
// pair times), compiled four ways:
//
//   1. no __launch_bounds__          the compiler's choice of registers (all 72 values live)
//   2. __launch_bounds__(256, 2)     at most 128 registers per thread: 2 blocks per SM
//   3. __launch_bounds__(256, 4)     at most 64: 4 blocks per SM, more spilled to local memory
//   4. __launch_bounds__(256, 8)     at most 32: full occupancy, most of the matrix spilled
//
// More resident warps hide more memory latency; spilled values cost local-memory traffic
// (L1, then L2 and DRAM when L1 overflows). Which one wins is what this measures.
// Bound: memory. Napkin math: 2M systems x 320 bytes (A and b in, x out) = 671 MB,
// ~0.22 ms at 3 TB/s; 436 FLOPs per system is 1.4 FLOP/byte, far below the fp32 ridge.
//
// Build: make -C ch1 launch_bounds_demo   (the rule passes -Xptxas -v: registers and spill bytes per
//        kernel are printed at compile time)
// Prints, per version: registers per thread, local memory per thread, resident blocks per SM and the
// theoretical occupancy they allow, ms, GB/s and % of the measured copy bandwidth; exits 1 on a mismatch.
// Achieved occupancy and spill traffic need Nsight Compute (ch1/README.md gives the command).
#include <functional>

#include "cuda_check.cuh"
#include "launch_bounds.cuh"

using namespace launch_bounds;

constexpr int64_t M = (int64_t)2 << 20;  // 2M systems

// Double-precision reference: the same elimination without pivoting.
void solve_reference(const std::vector<float>& A, const std::vector<float>& b, std::vector<float>& x) {
  for (int64_t m = 0; m < M; ++m) {
    double a[S][S], r[S];
    for (int i = 0; i < S; ++i) {
      for (int j = 0; j < S; ++j) a[i][j] = A[(i * S + j) * M + m];
      r[i] = b[i * M + m];
    }
    for (int k = 0; k < S; ++k)
      for (int i = k + 1; i < S; ++i) {
        double f = a[i][k] / a[k][k];
        for (int j = k + 1; j < S; ++j) a[i][j] -= f * a[k][j];
        r[i] -= f * r[k];
      }
    for (int i = S - 1; i >= 0; --i) {
      double s = r[i];
      for (int j = i + 1; j < S; ++j) s -= a[i][j] * r[j];
      r[i] = s / a[i][i];
    }
    for (int i = 0; i < S; ++i) x[i * M + m] = (float)r[i];
  }
}

int main() {
  print_device();
  const double peak = measured_copy_gbps();
  std::printf("measured copy bandwidth: %.0f GB/s (read + write)\n\n", peak);

  // Random entries in [-1, 1), plus 8 on the diagonal: strictly diagonally dominant, so elimination
  // without pivoting is stable and float32 agrees with the double reference to ~1e-7.
  std::vector<float> hA(S * S * M), hb(S * M), ref(S * M), out(S * M);
  fill_random(hA, 11);
  fill_random(hb, 12);
  for (int i = 0; i < S; ++i)
    for (int64_t m = 0; m < M; ++m) hA[(i * S + i) * M + m] += 8.0f;
  solve_reference(hA, hb, ref);

  float *A, *b, *x;
  CUDA_CHECK(cudaMalloc(&A, hA.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b, hb.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x, out.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(A, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice));

  struct Version { const char* name; int min_blocks; };
  const Version versions[] = {{"1 no __launch_bounds__", 0}, {"2 __launch_bounds__(256, 2)", 2},
                              {"3 __launch_bounds__(256, 4)", 4}, {"4 __launch_bounds__(256, 8)", 8}};

  // Verify every version first.
  bool ok = true;
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(x, 0xFF, out.size() * sizeof(float)));  // NaN poison: unwritten outputs fail
    CUDA_CHECK(launch_solve8(v.min_blocks, A, b, x, M, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(out.data(), x, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double err = rel_error(out.data(), ref.data(), out.size());
    bool pass = err < 1e-5;  // fp32 against a double reference on well-conditioned systems
    std::printf("verify %-30s rel err %.2e %s\n", v.name, err, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  const double bytes = BYTES_PER_SYSTEM * M;
  std::printf("\n%-30s %6s %14s %10s %10s %9s %8s %10s %8s\n", "version (2M 8x8 solves)", "regs", "local B/thread",
              "blocks/SM", "occupancy", "ms", "GB/s", "% of copy", "speedup");
  float base = 0.f;
  for (const auto& v : versions) {
    KernelInfo info;
    CUDA_CHECK(kernel_info(v.min_blocks, &info));
    float ms = median_ms([&] { CUDA_CHECK(launch_solve8(v.min_blocks, A, b, x, M, 0)); }, 5, 50, true);
    if (base == 0.f) base = ms;
    double gbps = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-30s %6d %14zu %10d %9.1f%% %9.4f %8.0f %9.1f%% %7.2fx\n", v.name, info.registers, info.local_bytes,
                info.blocks_per_sm, 100.0 * info.occupancy, ms, gbps, 100.0 * gbps / peak, base / ms);
  }
  for (void* p : {(void*)A, (void*)b, (void*)x}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
