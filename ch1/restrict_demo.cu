// restrict_demo.cu: what __restrict__ tells the compiler, and when it is worth anything on the GPU.
//
// y = A x with A stored column-major (rows x cols, A[k * rows + r]), one thread per row: consecutive
// threads read consecutive addresses of each column, so every load is coalesced. Four versions of
// that one loop, which differ only in where the running sum lives and in the pointer qualifiers:
//
//   1. accumulate in y, may alias       y[r] += A[k*rows + r] * x[k]; plain pointers. y might overlap A
//                                       or x, so every iteration must store y[r] before the next loads
//                                       (they might read it): a store per step, and the loads of step
//                                       k+1 cannot be issued before the store of step k.
//   2. accumulate in y, __restrict__    the same source with y, A and x declared not to overlap: the
//                                       compiler keeps the sum in a register, stores y[r] once, and may
//                                       issue the loads of several steps together. A and x, read-only
//                                       and unaliased, are loaded through the non-coherent (read-only)
//                                       path: LDG.E.CONSTANT in the SASS instead of LDG.E.
//   3. local sum, may alias             what a careful engineer writes without the keyword: the sum in
//                                       a local variable, one store after the loop. No store inside the
//                                       loop, so nothing orders the loads: the compiler can batch them.
//   4. local sum, __restrict__          3 plus the keyword: only the load flavour changes.
//
// So the keyword pays where the loop stores through a pointer the compiler cannot tell apart from its
// inputs (1 -> 2); once the loop has no such store (3), it changes the loads to the read-only path and
// nothing else; on this loop, on the H100, 3 and 4 run at the same speed (the measured table in ch1/README.md).
// `make -C ch1 restrict_loads` prints each kernel's loads and stores from the PTX and, with cuobjdump, the SASS.
//
// Build: make -C ch1 restrict_demo
// Prints, per version: ms, GB/s (A read once, x and y once), % of the measured copy bandwidth, and the
// speedup over version 1; exits 1 if any version disagrees with the CPU. Built with -DINJECT_FAULT, one
// row of version 4 reads as unwritten (NaN), and the run must say MISMATCH and FAIL.
// Bound: memory: 4 bytes of A per multiply-add (A is 1 GiB: 2^18 rows x 2^10 columns).
#include <cstdint>

#include "cuda_check.cuh"

constexpr int THREADS = 256;
constexpr int64_t ROWS = 1 << 18;  // one thread per row: 1024 blocks, about 8 per SM on 132 SMs
constexpr int64_t COLS = 1 << 10;

// 1. The running sum lives in y: plain pointers.
__global__ void gemv_y_may_alias(const float* A, const float* x, float* y, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  y[r] = 0.0f;
  for (int64_t k = 0; k < cols; ++k) y[r] += A[k * rows + r] * x[k];
}

// 2. The same body; the pointers are declared not to overlap.
__global__ void gemv_y_restrict(const float* __restrict__ A, const float* __restrict__ x,
                                float* __restrict__ y, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  y[r] = 0.0f;
  for (int64_t k = 0; k < cols; ++k) y[r] += A[k * rows + r] * x[k];
}

// 3. The sum in a register, one store after the loop: plain pointers.
__global__ void gemv_local_may_alias(const float* A, const float* x, float* y, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float sum = 0.0f;
  for (int64_t k = 0; k < cols; ++k) sum += A[k * rows + r] * x[k];
  y[r] = sum;
}

// 4. 3 with the pointers declared not to overlap.
__global__ void gemv_local_restrict(const float* __restrict__ A, const float* __restrict__ x,
                                    float* __restrict__ y, int64_t rows, int64_t cols) {
  int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float sum = 0.0f;
  for (int64_t k = 0; k < cols; ++k) sum += A[k * rows + r] * x[k];
  y[r] = sum;
}

using Kernel = void (*)(const float*, const float*, float*, int64_t, int64_t);

int main() {
  print_device();
  const size_t a_elems = (size_t)ROWS * COLS;
  std::vector<float> hA(a_elems), hx(COLS), ref(ROWS);
  fill_random(hA, 1);
  fill_random(hx, 2);
  for (int64_t r = 0; r < ROWS; ++r) {  // the reference in double, in the same order over k
    double s = 0.0;
    for (int64_t k = 0; k < COLS; ++k) s += (double)hA[k * ROWS + r] * hx[k];
    ref[r] = (float)s;
  }
  float *A, *x, *y;
  CUDA_CHECK(cudaMalloc(&A, a_elems * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&x, COLS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, ROWS * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(A, hA.data(), a_elems * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(x, hx.data(), COLS * sizeof(float), cudaMemcpyHostToDevice));

  struct Version { const char* name; Kernel k; };
  const Version versions[] = {
      {"1. accumulate in y, may alias", gemv_y_may_alias},
      {"2. accumulate in y, __restrict__", gemv_y_restrict},
      {"3. local sum, may alias", gemv_local_may_alias},
      {"4. local sum, __restrict__", gemv_local_restrict},
  };
  const unsigned blocks = (unsigned)((ROWS + THREADS - 1) / THREADS);

  // Verify every version before timing any.
  bool ok = true;
  std::vector<float> out(ROWS);
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(y, 0xFF, ROWS * sizeof(float)));  // NaNs: an unwritten row fails
    v.k<<<blocks, THREADS>>>(A, x, y, ROWS, COLS);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(out.data(), y, ROWS * sizeof(float), cudaMemcpyDeviceToHost));
#ifdef INJECT_FAULT  // the check's negative control: nvcc -DINJECT_FAULT leaves one row of version 4 unwritten
    if (v.k == gemv_local_restrict) out[ROWS / 2] = NAN;
#endif
    double err = rel_error(out.data(), ref.data(), ROWS);
    bool pass = err < 1e-5;  // fp32 sums of 1024 products, against double
    std::printf("check %-34s rel. error %.2e  %s\n", v.name, err, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  const double bytes = (double)a_elems * 4 + COLS * 4 + ROWS * 4;  // A, x and y, each moved once
  const double copy_gbps = measured_copy_gbps();
  std::printf("\nmeasured copy bandwidth: %.0f GB/s (read + write)\n", copy_gbps);
  std::printf("%-34s %9s %9s %11s %8s\n", "version", "ms", "GB/s", "% of copy", "speedup");
  float first_ms = 0.0f;
  for (const auto& v : versions) {
    float ms = median_ms([&] { v.k<<<blocks, THREADS>>>(A, x, y, ROWS, COLS); });
    if (first_ms == 0.0f) first_ms = ms;
    double gbps = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-34s %9.3f %9.0f %10.1f%% %7.2fx\n", v.name, ms, gbps, 100.0 * gbps / copy_gbps, first_ms / ms);
  }
  CUDA_CHECK(cudaFree(A));
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
  std::printf("PASS\n");
  return 0;
}
