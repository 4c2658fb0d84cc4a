// cuda_check.cuh: the one header the .cu samples share.
// Error checks, event timing over repeated launches with an L2 scrub, seeded
// random inputs, and a relative-error check. Everything else stays in each sample.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

// A failed CUDA call: exit 1 naming it. Without a GPU the runtime's first call fails with cudaErrorNoDevice, or,
// where no NVIDIA driver is loaded at all, with cudaErrorInsufficientDriver ("CUDA driver version is
// insufficient") or cudaErrorStubLibrary, which read like a version problem: each is said as what it is, in one
// line, with exit 2 (bad input, as everywhere in the repository).
[[noreturn]] inline void cuda_fail(cudaError_t err, const char* file, int line) {
  if (err == cudaErrorInsufficientDriver || err == cudaErrorStubLibrary) {
    // A loaded NVIDIA kernel driver has /proc/driver/nvidia/version: then the message means what it says.
    if (std::FILE* f = std::fopen("/proc/driver/nvidia/version", "r")) {
      std::fclose(f);
      if (err == cudaErrorStubLibrary)
        std::fprintf(stderr, "error: this sample loaded the CUDA toolkit's stub libcuda.so, not the driver's; take "
                             "the toolkit's lib64/stubs folder off LD_LIBRARY_PATH\n");
      else
        std::fprintf(stderr, "error: the NVIDIA driver is older than this sample's CUDA runtime (%s)\n",
                     cudaGetErrorString(err));
    } else {
      std::fprintf(stderr, "error: no CUDA GPU is present (no NVIDIA driver is loaded); this sample needs one\n");
    }
    std::exit(2);
  }
  if (err == cudaErrorNoDevice) {
    std::fprintf(stderr, "error: no CUDA GPU is present (the CUDA runtime finds none); this sample needs one\n");
    std::exit(2);
  }
  std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err), file, line, cudaGetErrorString(err));
  std::exit(1);
}

#define CUDA_CHECK(call)                                              \
  do {                                                                \
    cudaError_t err_ = (call);                                        \
    if (err_ != cudaSuccess) cuda_fail(err_, __FILE__, __LINE__);     \
  } while (0)

// Before a sample's first output: one line and exit 2 where there is no GPU to run it on.
inline void require_gpu() {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count == 0) cuda_fail(cudaErrorNoDevice, __FILE__, __LINE__);
}

// After a kernel launch: catch bad launch configurations at once.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// Deterministic uniform values in [-1, 1): never zeros, so unwritten outputs show.
inline void fill_random(std::vector<float>& v, unsigned seed) {
  unsigned s = seed * 2654435761u + 1u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (float)((s >> 8) & 0xFFFFFF) / (float)0x800000 - 1.0f;
  }
}

// ||out - ref|| / ||ref|| in double; NaN anywhere makes it NaN (and so fails any check).
inline double rel_error(const float* out, const float* ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double d = (double)out[i] - (double)ref[i];
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// Median milliseconds per call of `launch` over `reps` timed calls after `warmup` calls.
// Each call is bracketed by its own events; with scrub_l2 a buffer larger than L2 is
// written first, so a memory-bound kernel reads from DRAM as it would in a real pipeline.
template <typename F>
float median_ms(F launch, int warmup = 5, int reps = 50, bool scrub_l2 = true) {
  static char* scrub = nullptr;
  static size_t scrub_bytes = 0;
  if (scrub_l2 && !scrub) {
    int dev = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    scrub_bytes = std::max<size_t>(2 * (size_t)l2, 64u << 20);
    CUDA_CHECK(cudaMalloc(&scrub, scrub_bytes));
  }
  for (int i = 0; i < warmup; ++i) launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> start(reps), stop(reps);
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventCreate(&start[i]));
    CUDA_CHECK(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < reps; ++i) {
    if (scrub_l2) CUDA_CHECK(cudaMemsetAsync(scrub, i & 0xFF, scrub_bytes));
    CUDA_CHECK(cudaEventRecord(start[i]));
    launch();
    CUDA_CHECK(cudaEventRecord(stop[i]));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventElapsedTime(&ms[i], start[i], stop[i]));
    CUDA_CHECK(cudaEventDestroy(start[i]));
    CUDA_CHECK(cudaEventDestroy(stop[i]));
  }
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

// Measured device-to-device copy bandwidth (bytes read + written), the ceiling for memory-bound kernels.
inline double measured_copy_gbps(size_t bytes = (size_t)1 << 30) {
  void *a = nullptr, *b = nullptr;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMemset(a, 1, bytes));
  float ms = median_ms([&] { CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 3, 20, false);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

inline void print_device() {
  int dev = 0;
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", p.name, p.major, p.minor, p.multiProcessorCount);
}
