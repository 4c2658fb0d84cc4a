// batched_gemm_example.cu: 40 small GEMMs three ways through cuBLAS.
//
//   1. a loop of 40 cublasSgemm calls         (40 launches)
//   2. cublasSgemmBatched, an array of pointers (1 launch)
//   3. cublasSgemmStridedBatched, one stride    (1 launch, no pointer array to read)
//
// Each GEMM is 128x128x128 fp32: 4.2 MFLOP, a few microseconds of math, so
// version 1 is bound by launch overhead and 2-3 pay it once for all 40.
// All three results are checked against a CPU reference before timing.
//
// Build: make -C ch1            (or: nvcc -O3 -arch=sm_90 -I../common/cuda batched_gemm_example.cu -lcublas)
// Prints: ms per call of all 40 GEMMs, TFLOP/s and speedup over the loop; exits 1 on a mismatch.
#include <cublas_v2.h>

#include <functional>

#include "cuda_check.cuh"

#define CUBLAS_CHECK(call)                                                          \
  do {                                                                              \
    cublasStatus_t st_ = (call);                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                             \
      std::fprintf(stderr, "cuBLAS error %d at %s:%d\n", (int)st_, __FILE__, __LINE__); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

constexpr int BATCH = 40, N = 128;  // square: M = N = K
constexpr size_t ELEMS = (size_t)N * N;

// Column-major reference, as cuBLAS computes it: C = A * B.
void gemm_reference(const float* A, const float* B, float* C) {
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < N; ++i) {
      double acc = 0.0;
      for (int k = 0; k < N; ++k) acc += (double)A[i + k * N] * B[k + j * N];
      C[i + j * N] = (float)acc;
    }
}

int main() {
  print_device();
  std::vector<float> hA(BATCH * ELEMS), hB(BATCH * ELEMS), ref(BATCH * ELEMS), out(BATCH * ELEMS);
  fill_random(hA, 1);
  fill_random(hB, 2);
  for (int b = 0; b < BATCH; ++b) gemm_reference(&hA[b * ELEMS], &hB[b * ELEMS], &ref[b * ELEMS]);

  float *A, *B, *C;
  CUDA_CHECK(cudaMalloc(&A, BATCH * ELEMS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&B, BATCH * ELEMS * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&C, BATCH * ELEMS * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(A, hA.data(), BATCH * ELEMS * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(B, hB.data(), BATCH * ELEMS * sizeof(float), cudaMemcpyHostToDevice));

  // Pointer arrays for the pointer-array API live in device memory.
  std::vector<const float*> pa(BATCH), pb(BATCH);
  std::vector<float*> pc(BATCH);
  for (int b = 0; b < BATCH; ++b) {
    pa[b] = A + b * ELEMS;
    pb[b] = B + b * ELEMS;
    pc[b] = C + b * ELEMS;
  }
  const float **dA, **dB;
  float** dC;
  CUDA_CHECK(cudaMalloc(&dA, BATCH * sizeof(float*)));
  CUDA_CHECK(cudaMalloc(&dB, BATCH * sizeof(float*)));
  CUDA_CHECK(cudaMalloc(&dC, BATCH * sizeof(float*)));
  CUDA_CHECK(cudaMemcpy(dA, pa.data(), BATCH * sizeof(float*), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, pb.data(), BATCH * sizeof(float*), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dC, pc.data(), BATCH * sizeof(float*), cudaMemcpyHostToDevice));

  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));  // true fp32, no TF32, for a like-for-like check
  const float one = 1.0f, zero = 0.0f;

  auto loop = [&] {
    for (int b = 0; b < BATCH; ++b)
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, A + b * ELEMS, N, B + b * ELEMS, N,
                               &zero, C + b * ELEMS, N));
  };
  auto batched = [&] {
    CUBLAS_CHECK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dA, N, dB, N, &zero, dC, N, BATCH));
  };
  auto strided = [&] {
    CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, A, N, ELEMS, B, N, ELEMS,
                                           &zero, C, N, ELEMS, BATCH));
  };

  struct Version { const char* name; std::function<void()> run; };
  Version versions[] = {{"loop of cublasSgemm", loop}, {"cublasSgemmBatched", batched},
                        {"cublasSgemmStridedBatched", strided}};

  // Verify every version first.
  bool ok = true;
  for (auto& v : versions) {
    CUDA_CHECK(cudaMemset(C, 0xFF, BATCH * ELEMS * sizeof(float)));  // NaN poison: unwritten outputs fail
    v.run();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(out.data(), C, BATCH * ELEMS * sizeof(float), cudaMemcpyDeviceToHost));
    double err = rel_error(out.data(), ref.data(), out.size());
    bool pass = err < 1e-5;  // fp32 with a different summation order
    std::printf("verify %-28s rel err %.2e %s\n", v.name, err, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  const double flops = 2.0 * BATCH * N * N * N;
  std::printf("\n%-28s %10s %10s %9s\n", "version (40 GEMMs 128^3)", "ms", "TFLOP/s", "speedup");
  float base = 0.f;
  for (auto& v : versions) {
    float ms = median_ms(v.run, 10, 200, false);  // inputs stay in L2 in a real batched workload too
    if (base == 0.f) base = ms;
    std::printf("%-28s %10.4f %10.3f %8.1fx\n", v.name, ms, flops / (ms * 1e-3) / 1e12, base / ms);
  }
  CUBLAS_CHECK(cublasDestroy(h));
  for (void* p : {(void*)A, (void*)B, (void*)C, (void*)dA, (void*)dB, (void*)dC}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
